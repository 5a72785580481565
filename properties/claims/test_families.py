"""The served-vs-trained claims of the model families beyond Kimi-K3 (semantics §18), and C4 where an engine
finishes on the device.

``--model FAMILY`` names the family (`reference.system.families`); the engine's paths for it are the
``served_paths`` of each verdict column (``VLLM`` the default serving setting, ``VLLM host-normalized`` beside
it); the trained side is the family's checkpoint processor (`properties.families.Trained`). C13 (geometry),
C14 (pixels) and C15 (normalization) run for every family but Kimi-K3 (whose C13-C15 are ``test_served.py``'s);
a family judged on normalization only records ``n/a`` for C13 and C14, and so does a column whose paths declare
they answer neither (a path's ``judged_claims``: vLLM's GLM-4.1V ships its pixels raw, SGLang's computes the
checkpoint's geometry; `judged`). C4 here is the device-finished values
against the host-finished ones after the cast to the tower's BF16, for every family (Kimi-K3 included) on an
engine with both paths; on SGLang, and on the model, C4 is ``test_eager_deferred.py``'s.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest
from hypothesis import strategies as st

from deferlab.properties import claimcheck, family_geometry, family_impact, impact, served, verdicts
from deferlab.properties import families as fam
from deferlab.properties.strategies import served as ss
from deferlab.reference.system import families
from deferlab.reference.system.systems import family_column

# Sizes where each family's geometry rule turns (semantics §18.2, §18.4): Qwen's rounding ties (42 and 70 at
# factor 28), the min and max pixel branches, the 200:1 ratio; InternVL's ties (448x448 -> 1 tile, 896x448 -> 3,
# 1344x448 -> 4, 800x800 -> 5), the asymmetric 7x2 / 2x7, long thin sizes.
WORKED = {
    "qwen": [(90, 60), (1, 1), (42, 70), (70, 42), (3584, 3626), (200, 1), (201, 1), (56, 56), (4096, 4096), (28, 5600)],
    "internvl": [(448, 448), (224, 224), (800, 800), (896, 448), (1344, 448), (500, 1000), (3000, 1000), (7, 2), (2, 7),
                 (1, 1), (4096, 1), (1000, 1000)],
    # GLM-4.1V's (semantics §18.9): a small side scaled up before the 200 ratio check (1x200 kept, 1x201 refused),
    # T*h*w against the bounds (1x1 -> 84x84, 4096x4096 -> 2184x2184)
    "glm4v": [(1, 1), (1, 200), (1, 201), (6, 1), (112, 112), (70, 42), (1920, 1080), (4000, 3000), (4096, 4096)],
}  # fmt: skip
PIXEL_CLASSES = tuple(c for c in ss.IMAGE_CLASSES)
NOT_FULL = "{family} is judged on normalization only (semantics §18.3): no geometry or pixels of its are checked"
NO_PIXELS = "{family} is judged on geometry and normalization (semantics §18.9): its pixels are not restated"


def _kind(family: str) -> str:
    cfg = fam.config(family)
    return cfg.kind  # "qwen", "internvl" or "norm": declared by the config's type (reference.system.family_configs)


PATH_CLAIMS = ("C13", "C14")  # the claims a served path may answer beyond, or short of, its family's scope


def judged(paths: list, claim: str) -> list:
    """The paths of a column that answer ``claim``: each path's ``judged_claims`` (the geometry and pixel claims it
    answers) where it declares them, else every claim its family is judged on (`_applies` checks the family)."""
    return [p for p in paths if claim not in PATH_CLAIMS or claim in getattr(p, "judged_claims", PATH_CLAIMS)]


def _applies(paths: list, family: str, policy: str, claim: str) -> tuple[bool, str]:
    """Whether the claim can be decided on ``paths`` (`judged` ones), and the ``n/a`` reason when not."""
    scope = families.family(family)
    if claim in PATH_CLAIMS and claim not in scope.claims:
        return False, (NO_PIXELS if scope.scope == "geometry" else NOT_FULL).format(family=family)
    if not paths:
        return False, f"no path of this system serves {family} under {policy} (semantics §18, the registry)"
    if not judged(paths, claim):
        p = paths[0]
        why = getattr(p, "not_judged", "")
        return False, f"{p.name} is judged on normalization only: {why}; {claim} is judged on the family's other paths"
    return True, ""


@cache
def trained(family: str) -> fam.Trained:
    return fam.Trained(family)


def sizes(family: str) -> st.SearchStrategy[tuple[int, int]]:
    """(width, height) up to 4096 per side, a third of them long and thin; shrinks towards 1x1."""
    side = st.integers(1, 4096)
    thin = st.tuples(st.integers(1, 24), st.integers(1, 4096))
    return st.one_of(st.tuples(side, side), thin, thin.map(lambda t: (t[1], t[0])))


@pytest.mark.families("others")
@pytest.mark.claim("C13")
def test_claim_c13_family_geometry_equals_checkpoint(served_session, served_paths, policy, model_family):
    """C13 for a family: resize target, grid and prompt tokens equal the checkpoint's for every size; on an
    engine, also every size up to 4096 x 4096 of the engine's own geometry function against the vectorized
    oracle (`properties.family_geometry`), whose first differing size is pinned as a counterexample."""
    ok, why = _applies(served_paths, model_family, policy, "C13")
    served_paths = judged(served_paths, "C13")
    cfg, want = fam.config(model_family), trained(model_family)
    sweep = exhaustive(served_session, served_paths, model_family) if ok else None
    pinned = list(WORKED.get(_kind(model_family), []))
    if sweep is not None and sweep.counterexample is not None and sweep.counterexample not in pinned:
        pinned.append(sweep.counterexample)  # the sweep's first difference, decided on the path's own geometry
    text = f"{model_family}: worked sizes of semantics §18 and drawn sizes up to 4096 per side"
    verdict = claimcheck.verify_claim(
        "C13",
        policy,
        sizes(model_family),
        lambda v: served.problems(
            served_paths, lambda p: fam.geometry_problem(p, v[0], v[1], cfg, want), f"[{v[0]}x{v[1]}]"
        ),
        pinned=pinned,
        evidence=text + (f"; {sweep.evidence()}" if sweep is not None else ""),
        applicable=ok,
        not_applicable=why,
        provenance=served.provenance(served_paths) if ok else {},
    )
    if verdict == "fails" and served_paths and impact.wanted():  # semantics §21.7
        found = impact.guarded(lambda: family_impact.geometry(served_paths, model_family, want))
        verdicts.attach_impact("C13", policy, found)
    claimcheck.assert_expected("C13", policy, verdict)


def exhaustive(session: Any, paths: list, family: str) -> family_geometry.Exhaustive | None:
    """C13's exhaustive sweep on an engine (none on deferlab's model, which serves Kimi-K3 only)."""
    if session.engine is None or _kind(family) == "norm":
        return None
    return family_geometry.exhaustive(session.engine, paths, fam.config(family))


def cases() -> st.SearchStrategy[tuple[str, int, int, int]]:
    """(image class, width, height, seed): small images of every class the checkpoint accepts."""
    return st.tuples(st.sampled_from(PIXEL_CLASSES), st.integers(1, 40), st.integers(1, 40), st.integers(0, 2**16))


def check_pixels(paths: list, family: str, case: tuple[str, int, int, int]) -> None:
    cls, w, h, seed = case
    image = ss.make_image(cls, w, h, seed)
    cfg, want = fam.config(family), trained(family)
    served.problems(paths, lambda p: fam.pixel_problem(p, image, cfg, want), f"[{cls}] {w}x{h}")


@pytest.mark.families("others")
@pytest.mark.claim("C14")
def test_claim_c14_family_pixels_equal_checkpoint(served_paths, policy, model_family):
    """C14 for a family: every served value equals the checkpoint's or is explained (1 level, 2 ulps)."""
    ok, why = _applies(served_paths, model_family, policy, "C14")
    served_paths = judged(served_paths, "C14")
    pinned = [(cls, 12, 10, 0) for cls in PIXEL_CLASSES]
    verdict = claimcheck.verify_claim(
        "C14",
        policy,
        cases(),
        lambda case: check_pixels(served_paths, model_family, case),
        pinned=pinned if ok else [],
        evidence=f"{model_family}: a 12x10 image of every class, then drawn images up to 40x40",
        applicable=ok,
        not_applicable=why,
        provenance=served.provenance(served_paths) if ok else {},
        partition=lambda case: case[0],
    )
    if verdict == "fails" and served_paths and impact.wanted():  # semantics §21.7, at the recorded minimal input
        rows = [r for r in verdicts.RECORDER.claims if r["id"] == "C14" and r["policy"] == policy]
        case = rows[-1].get("counterexample") if rows else None
        found = impact.guarded(lambda: family_impact.pixels(served_paths, model_family, trained(model_family), case))
        verdicts.attach_impact("C14", policy, found)
    claimcheck.assert_expected("C14", policy, verdict)


@pytest.mark.families("others")
@pytest.mark.claim("C15")
def test_claim_c15_family_normalization_equals_checkpoint(served_paths, policy, model_family):
    """C15 for a family: every level x channel equals the checkpoint's bitwise, in FP32 and after BF16."""
    ok, why = _applies(served_paths, model_family, policy, "C15")
    cfg, want = fam.config(model_family), trained(model_family)

    def evidence() -> str:
        return "; ".join(fam.levels_summary(p, cfg, want) for p in served_paths)

    verdict = claimcheck.verify_claim(
        "C15",
        policy,
        st.just(model_family),
        lambda _: served.problems(
            served_paths, lambda p: fam.normalization_problem(p, cfg, want), "[published config]"
        ),
        max_examples=1,
        evidence=evidence if ok else "",
        applicable=ok,
        not_applicable=why,
        provenance=served.provenance(served_paths) if ok else {},
    )
    claimcheck.assert_expected("C15", policy, verdict)


@pytest.mark.families("all")
@pytest.mark.claim("C4")
def test_claim_c4_device_finished_equals_host_finished(served_session, served_paths, policy, model_family):
    """C4 where an engine finishes on the device: its default values equal its host-finished ones after BF16."""
    serving_only = isinstance(served_session, served.EngineSession)  # an engine judged on what it serves (no seam)
    if not serving_only and model_family == "kimi-k3":
        pytest.skip("C4 is test_eager_deferred.py's on the model and on SGLang (its deferred owner path)")
    paths = {p.path: p for p in served_session.all_paths(policy)} if serving_only else {}
    device, host = paths.get("device-normalized"), paths.get("host-normalized")
    ok = device is not None and host is not None and family_column(device.label, model_family) == policy
    why = "this release has one path for the family: nothing is finished on the device (semantics §18)"
    if not serving_only:
        why = "SGLang serves this family on one path (its own processor): nothing device-finished to compare (§18.7)"
    if device is not None and host is not None and family_column(host.label, model_family) == policy:
        why = "the host-normalized column is the comparison's other side (C4 is recorded on the default column)"
    cfg = fam.config(model_family) if model_family != "kimi-k3" else served.session_config()
    images = [ss.make_image(cls, 12, 10, 0) for cls in ("RGB", "L", "RGBA partly transparent")]
    verdict = claimcheck.verify_claim(
        "C4",
        policy,
        st.just(model_family),
        lambda _: _raise_if(fam.deferral_problem(device, host, images, cfg)),
        max_examples=1,
        evidence="every level x channel of both paths, and three small images, after the cast to BF16",
        applicable=ok,
        not_applicable=why,
        provenance=served.provenance([device, host]) if ok else {},
    )
    claimcheck.assert_expected("C4", policy, verdict)


def _raise_if(problem: str | None) -> None:
    if problem:
        raise AssertionError(problem)
