"""C20: the image an engine's media loader makes of the bytes a client sends equals the checkpoint's decode of
the same bytes (semantics §20.8).

The trained side is transformers' ``load_image`` run for real (`properties.bytes_trained`); the engine's side is its
plugin's ``image_bytes`` module (``impl.<engine>.image_bytes``), its own loader run on the loaded release. Every
encoded class of `properties.strategies.encoded` is pinned (17x11), then drawn (13x9 to 40x30), each sent as a
data URI and as a file. The decode is the engine's, not the family's, except where a family's processor class
loads its own (SGLang's GLM-4.1V): it is computed once per engine, release and loader function (cached by request)
and every family column taking that function reuses it; a second column of one family
(``host-normalized``) records n/a. deferlab's model takes decoded images only: n/a.
"""

from __future__ import annotations

import importlib
from functools import cache
from typing import Any

import pytest

from deferlab.properties import bytes_trained, claimcheck, impact, verdicts
from deferlab.properties.strategies import encoded
from deferlab.reference.oracle import bytes_served
from deferlab.reference.system import families
from deferlab.reference.system.systems import DEFAULT_FAMILY, split_label

PINNED = [(cls, 17, 11, 0) for cls in encoded.ENCODED_CLASSES]
NOT_MODEL = "deferlab's model takes decoded images: it has no loader of a client's bytes (semantics §20.8)"
SECOND_COLUMN = "the decode is the engine's, judged on the family's default column (semantics §20.8)"
SHARED = {
    "sglang": "every family SGLang serves takes its base class's loader (Kimi-K3's wrapper calls it; the Qwen processors "
    "decode through the media-artifact cache, the same load_image without the RGB step: their processor converts) "
    "unless its processor class loads its own (GLM-4.1V: smart_rgb_conversion from 0.5.20), as the provenance names",
    "vllm": "every vLLM model gets its image from this connector",
    "lmdeploy": "InternVL, LMDeploy's one checked family, takes this loader's image",
}


@cache
def _trained() -> Any:
    return bytes_trained.trained()


_LOADERS: dict[tuple[str, int, str], tuple[Any, ...]] = {}
_SAME: dict[tuple[int, str, str], Any] = {}


def _loaders(module: str, source: Any, family: str) -> tuple[Any, ...]:
    """The engine's loaders of ``family``'s requests over the session's loaded release, built once (a `Source` is
    not hashable). A loader running the same function as one built for another family is that one, so `_problem`'s
    cache decodes a case once per function, not once per family column (most families share the engine's)."""
    key = (module, id(source), family)
    if key not in _LOADERS:
        built = importlib.import_module(module).image_loaders(source, family)
        _LOADERS[key] = tuple(_SAME.setdefault((id(source), x.label, x.function), x) for x in built)
    return _LOADERS[key]


@cache
def _problem(loader: Any, case: tuple[Any, ...]) -> str | None:
    """One case on one loader, both request kinds: the same for every family column (cached per loader). A case
    of five carries a user's server environment (``((NAME, value),)``): judged against the engine's rule only."""
    cls, w, h, seed, *more = case
    data = encoded.make_bytes(cls, w, h, seed)
    rule = bytes_served.rule_for(loader.system)
    found = []
    for kind in bytes_trained.KINDS:
        if more:
            problem = bytes_trained.option_problem(loader, data, kind, dict(more[0]), rule) if rule else None
        else:
            problem = bytes_trained.decode_problem(_trained(), loader, data, kind, rule)
        if problem:
            found.append(f"[{_name(case)} {w}x{h}; {kind}] {problem}")
    return "; ".join(found) or None


def _name(case: tuple[Any, ...]) -> str:
    """The case's partition: its class, and the environment it runs under where it names one."""
    return case[0] + "".join(f" {k}={v}" for k, v in (case[4] if len(case) > 4 else ()))


def pinned(loaders: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """Every class at 17x11, and, where a loader's engine has a stated rule (vLLM's), the option cases: its limits
    under a user's environment, and a request's own background (semantics §20.8 "Options", "A client's own
    background")."""
    if not any(bytes_served.rule_for(loader.system) for loader in loaders):
        return PINNED
    env = [(*bytes_served.OPTION_CASE, tuple(o.items())) for o in bytes_served.OPTIONS]
    return PINNED + env + [(*bytes_served.REQUEST_CASE, tuple(o.items())) for o in bytes_served.REQUESTS]


def serves(session: Any, family: str) -> bool:
    """Whether the registry says the session's release serves ``family`` (a path C13-C15 may not check, e.g. one
    declared for video: its images still come through the engine's loader)."""
    version = getattr(getattr(session, "source", None), "version", None)
    found = families.family(family).served
    return version is not None and any(s.covers(str(session.engine), str(version)) for s in found)


def check(loaders: tuple[Any, ...], case: tuple[str, int, int, int]) -> None:
    found = [p for p in (_problem(loader, case) for loader in loaders) if p]
    if found:
        raise AssertionError("; ".join(found))


def summary(loaders: tuple[Any, ...]) -> str:
    """The pinned classes each loader differs on (the report's per-class line)."""
    parts = []
    for loader in loaders:
        bad = [_name(case) for case in pinned(loaders) if _problem(loader, case)]
        parts.append(f"{loader.label} ({loader.system}) differs on {', '.join(bad) or 'no class'}")
    return "; ".join(parts)


def figure(loaders: tuple[Any, ...]) -> dict[str, Any] | None:
    """The side-by-side figure's data (`reports.report.plots.bytes`): the first pinned class a loader decodes
    differently from the trained side (both decoding, as a file), both images as RGB lists (17x11: small)."""
    import numpy as np

    for cls, w, h, seed in PINNED:
        data = encoded.make_bytes(cls, w, h, seed)
        want, refused = bytes_trained.decoded(_trained(), data, "file")
        for loader in loaders:
            got, gone = bytes_trained.decoded(loader, data, "file")
            if refused is None and gone is None and _problem(loader, (cls, w, h, seed)):
                rgb = [np.asarray(x.convert("RGB") if hasattr(x, "convert") else x, np.uint8) for x in (want, got)]
                return {"kind": "bytes-side-by-side", "class": f"{cls} {w}x{h}", "side": loader.label,
                        "trained": rgb[0].tolist(), "served": rgb[1].tolist()}  # fmt: skip
    return None


@pytest.mark.families("all")  # the decode is every family's, Kimi-K3's too
@pytest.mark.claim("C20")
def test_claim_c20_decoded_bytes_equal_checkpoint(served_session, served_paths, policy, model_family):
    """C20: size, mode and pixels bitwise equal transformers' ``load_image``'s; refusals agree."""
    from deferlab.reference.system.engines import engine

    facts = engine(served_session.engine) if served_session.engine is not None else None
    module = getattr(facts, "image_bytes", "") if facts is not None else ""
    ok, why = bool(module) and (bool(served_paths) or serves(served_session, model_family)), NOT_MODEL
    if facts is not None:
        why = f"no path of {facts.display} serves {model_family} under {policy} (semantics §18)"
        why = why if module else f"{facts.display} declares no image_bytes loader (EngineFacts.image_bytes)"
    if ok and split_label(policy)[2] is not None:
        ok, why = False, SECOND_COLUMN
    loaders = _loaders(module, served_session.source, model_family) if ok else ()
    trained = _trained() if ok else None
    evidence = (
        f"every class at 17x11 and drawn classes 13x9-40x30, each as a data URI and a file, against "
        f"{trained.system} {trained.function}; the loader: {SHARED.get(str(served_session.engine), '')}; "
        f"computed once per engine and release; where the semantics restate the engine's own decode "
        f"({bytes_served.stated()}, {bytes_served.SECTION}), every difference and shared refusal is read against "
        f"it, and its environment options are judged against it alone; {bytes_trained.CARD_NOT_RUN}"
        if trained is not None
        else ""
    )
    verdict = claimcheck.verify_claim(
        "C20",
        policy,
        encoded.encoded_cases(),
        lambda case: check(loaders, case),
        pinned=pinned(loaders) if ok else [],
        evidence=(lambda: f"{evidence}; {summary(loaders)}") if ok else "",
        applicable=ok,
        not_applicable=why,
        provenance={f"{x.label}: {k}": v for x in (trained, *loaders) for k, v in x.provenance().items()} if ok else {},
        partition=_name,
        figure=(lambda: figure(loaders)) if ok else None,
    )
    if verdict == "fails" and impact.wanted():  # what the failure does to realistic uploads (semantics §21.7)
        verdicts.attach_impact("C20", policy, impact.guarded(lambda: measure(loaders, model_family)))
    claimcheck.assert_expected("C20", policy, verdict)


def measure(loaders: tuple[Any, ...], family: str) -> dict[str, Any]:
    """C20's §21.7 numbers: the realistic share, and ``pixels`` at the first pinned class a loader decodes to the
    trained side's size and mode with other values (a size or mode difference is the grid's, not pixels)."""
    import numpy as np

    from deferlab.reference.system import family_configs

    out = impact.bytes_impact(loaders, _trained(), bytes_trained.decode_problem)
    if family == DEFAULT_FAMILY:  # Kimi-K3's checkpoint normalization is the seed's config (semantics §2)
        from deferlab.reference.system.config import PreprocessConfig

        norm: Any = PreprocessConfig()
    else:
        norm = family_configs.norm_of(family_configs.family_profile(family))
    for cls, w, h, seed in PINNED:
        data = encoded.make_bytes(cls, w, h, seed)
        want, refused = bytes_trained.decoded(_trained(), data, "file")
        for loader in loaders:
            got, gone = bytes_trained.decoded(loader, data, "file")
            if refused or gone or got.size != want.size or got.mode != want.mode:
                continue
            a, b = (np.asarray(x.convert("RGB"), np.uint8) for x in (got, want))
            if np.array_equal(a, b):
                continue
            numbers = impact.pixel_numbers(a, b, norm.image_mean, norm.image_std)
            out["pixels"] = {"input": f"{cls} {w}x{h}", "side": loader.label, **numbers}
            return out
    return out
