"""A served path's own scope (`properties.claims.test_families.judged` / `_applies`, semantics §18.9): a path
declares the geometry and pixel claims it answers (``judged_claims``), so one family can be judged on C13 and C14 on
one engine's path (SGLang's GLM-4.1V) and be ``n/a`` on another's (vLLM's, which ships GLM-4.1V's pixels raw), with a
one-line reason naming the path; a path that declares nothing is judged on its family's scope."""

from __future__ import annotations

from types import SimpleNamespace

from deferlab.properties.claims import test_families as tf


def _path(name: str, **declared: object) -> SimpleNamespace:
    return SimpleNamespace(name=name, **declared)


GEOMETRY = _path("sglang-0.5.23 (glm-4.1v, served)", judged_claims=("C13",), not_judged="pixels not restated")
FULL = _path("sglang-0.5.23 (glm-4.1v, served)", judged_claims=("C13", "C14"))  # SGLang's GLM path since 2026-12-07
RAW = _path("vllm-0.34.0 (glm-4.1v, device-normalized)", judged_claims=(), not_judged="vLLM ships the pixels raw")
PLAIN = _path("sglang-0.5.23 (qwen2.5-vl, served)")  # declares nothing: its family's scope


def test_a_path_that_declares_c13_is_judged_on_it_and_a_raw_path_is_na_naming_itself() -> None:
    assert tf._applies([GEOMETRY], "glm-4.1v", "SGLANG", "C13") == (True, "")
    ok, why = tf._applies([RAW], "glm-4.1v", "VLLM", "C13")
    assert not ok and why.startswith(RAW.name) and "vLLM ships the pixels raw" in why and "\n" not in why
    assert tf._applies([RAW], "glm-4.1v", "VLLM", "C15") == (True, "")  # normalization stays judged


def test_glm_is_judged_on_c14_where_its_path_answers_it_and_na_naming_the_path_elsewhere() -> None:
    assert tf._applies([FULL], "glm-4.1v", "SGLANG", "C14") == (True, "")  # the family's scope is full
    for path in (GEOMETRY, RAW):  # a path answering C13 only, and vLLM's raw pixels: C14 n/a by the path
        ok, why = tf._applies([path], "glm-4.1v", "SGLANG", "C14")
        assert not ok and why.startswith(path.name) and path.not_judged in why and "\n" not in why


def test_a_geometry_scope_family_is_na_on_c14_by_its_scope_whatever_its_path_declares() -> None:
    path = _path("sglang-0.5.23 (minicpm-v-4.6, served)", judged_claims=("C13", "C14"))
    ok, why = tf._applies([path], "minicpm-v-4.6", "SGLANG", "C14")  # MiniCPM-V 4.6's scope is geometry
    assert not ok and why == tf.NO_PIXELS.format(family="minicpm-v-4.6")


def test_the_familys_scope_still_comes_first_and_a_mixed_column_judges_only_its_answering_paths() -> None:
    ok, why = tf._applies([RAW], "gemma3", "VLLM", "C13")  # a normalization-only family: the family's reason
    assert not ok and why == tf.NOT_FULL.format(family="gemma3")
    assert tf.judged([RAW, GEOMETRY], "C13") == [GEOMETRY] and tf.judged([RAW, GEOMETRY], "C15") == [RAW, GEOMETRY]
    assert tf.judged([PLAIN], "C14") == [PLAIN] and tf._applies([PLAIN], "qwen2.5-vl", "SGLANG", "C14") == (True, "")


def test_every_sglang_family_path_answers_the_geometry_and_pixel_claims_its_family_is_judged_on():
    """A path class declaring fewer C13/C14 than its family's scope judges would turn a judged claim into ``n/a``
    on every release (the path-level scope's first cut did this to ERNIE-4.5-VL and MiMo-V2.5): the registry's
    families and the SGLang path classes agree, read without loading a release."""
    import importlib

    from deferlab.impl.sglang.families import PATHS
    from deferlab.reference.system import families

    for family, spec in PATHS.items():
        if family not in families.FAMILIES:
            continue
        cls = getattr(importlib.import_module(f"deferlab.impl.sglang.families.{spec.mine}"), spec.cls)
        declared = getattr(cls, "judged_claims", None)
        wanted = {"C13", "C14"} & set(families.family(family).claims)
        assert declared is None or wanted <= set(declared), (family, declared, wanted)


def test_the_registry_declares_what_each_engines_path_class_answers():
    """`Served.judges` (what the families table reads) is each path class's ``judged_claims``: vLLM's
    normalization-only entries and `NormPath` answer no geometry or pixel claim; an SGLang entry that declares
    nothing leaves it to a class judging at least its family's C13/C14 (the test above)."""
    import importlib

    from deferlab.impl.sglang.families import PATHS
    from deferlab.impl.vllm.family import NormPath
    from deferlab.impl.vllm.plugin import NORM
    from deferlab.reference.system import families

    for name in NORM:
        (served,) = [s for s in families.family(name).served if s.engine == "vllm"]
        assert served.judges == NormPath.judged_claims == (), name
    for family, spec in PATHS.items():
        if family not in families.FAMILIES:
            continue
        cls = getattr(importlib.import_module(f"deferlab.impl.sglang.families.{spec.mine}"), spec.cls)
        for served in (s for s in families.family(family).served if s.engine == "sglang"):
            assert served.judges is None or served.judges == tuple(cls.judged_claims), family
