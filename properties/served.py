"""The served paths of a session, and how C13-C15 read them against the checkpoint (semantics §16).

Why one harness: the three claims compare every path a system serves with
(`reference.system.served.ServedPath`) against the checkpoint's own processor
(`reference.oracle.checkpoint`), and they must read levels and ulps off the
served values in the one way §16.5 states. Which paths: without an engine
option, deferlab's model under each policy (its eager path, and its deferred
path where the policy defers); ``--sglang SPEC``: SGLang's eager (and
deferred) paths of the loaded release; ``--vllm SPEC``: vLLM's one path.

Each ``*_problem`` function checks one path and returns None or what is wrong
(no prefix); `problems` runs one over every path and raises one
AssertionError naming each failing path, so a system fails when any path does.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cache, lru_cache
from typing import Any

import numpy as np
from PIL import Image

from deferlab.reference.oracle import checkpoint, skew
from deferlab.reference.oracle.normalize import patchify
from deferlab.reference.oracle.numerics import bf16_bits, float32_bits
from deferlab.reference.system.config import PreprocessConfig
from deferlab.reference.system.profiles import DEFAULT_PROFILE, profile
from deferlab.reference.system.served import CHECKPOINT_ENV, ServedPath
from deferlab.reference.system.systems import split_label

# C14's allowance (b), in float32 ulps at the channel's largest |normalized value| (np.spacing of it). Semantics
# §14.1 measures every scale/bias form against the checkpoint's normalization at most 1.2e-7 apart for Kimi's
# 0.5/0.5 and 2.4e-7 for CLIP's mean/std: exactly one such ulp (2**-23 at 1.0, 2**-22 at CLIP's 2.15). Twice that
# is allowed. Not the ulp distance of the value itself: near 0 (level 127 at 0.5/0.5, -0.0039) the same 1.2e-7 is
# 126-128 ulps, cancellation in ``x - mean``, not an error of the served arithmetic (semantics §16.6).
ALLOWANCE_ULPS = 2


def session_config() -> PreprocessConfig:
    """The config the served claims run under: a snapshot's own (``--checkpoint DIR`` / ``DEFERLAB_CHECKPOINT``),
    else the default profile (Kimi-K3), as the checkpoint ships it."""
    snapshot = checkpoint_snapshot()
    return profile(DEFAULT_PROFILE) if snapshot is None else snapshot[0]


@cache
def checkpoint_snapshot() -> tuple[PreprocessConfig, dict[str, Any]] | None:
    """(config, raw media_proc_cfg) of the snapshot named by ``DEFERLAB_CHECKPOINT``, or None when unset."""
    from deferlab.reference.system.snapshot import read_checkpoint

    folder = os.environ.get(CHECKPOINT_ENV)
    return None if not folder else read_checkpoint(folder)


def own_code(path: ServedPath) -> bool:
    """Whether the path's processor is the system's own (vLLM 0.27-0.31 serve the checkpoint's remote code)."""
    return bool(getattr(path, "serves_own_processor", True))


class Session:
    """The served paths of one pytest session: ``engine`` None (deferlab's model, per policy; it serves Kimi-K3
    only), "sglang" or "vllm"; an engine's paths for a family are built (`build`) when a column of that family
    first asks, so one engine load judges every family of the session."""

    def __init__(
        self, engine: str | None = None, build: Callable[[str], list[Any]] | None = None, source: Any = None
    ) -> None:
        self.engine = engine
        self.source = source  # the loaded release (`impl.loader.sources.Source`); None for deferlab's model
        self._build = build
        self._engine: dict[str, list[Any]] = {}
        self._model: dict[str, list[ServedPath]] = {}

    def family_paths(self, family: str) -> list[Any]:
        """Every path the engine serves ``family`` with (none: the release does not serve it)."""
        if family not in self._engine:
            self._engine[family] = self._build(family) if self._build is not None else []
        return list(self._engine[family])

    def paths(self, policy: str) -> list[Any]:
        """Every path of the session's system for the verdict column ``policy`` (``[FAMILY:]LABEL``): an engine's
        paths of that family labelled so (``VLLM`` for the default serving setting, ``VLLM host-normalized``...),
        or the model's under that policy."""
        family, label, path = split_label(policy)
        if self.engine is not None:
            wanted = label if path is None else f"{label} {path}"
            return [p for p in self.family_paths(family) if getattr(p, "label", None) == wanted]
        if family != "kimi-k3":
            return []
        if policy not in self._model:
            from deferlab.impl.served import model_paths

            self._model[policy] = [p for p in model_paths(policy) if p.path == "eager" or p.impl.defers(policy)]
        return list(self._model[policy])

    def all_paths(self, policy: str) -> list[Any]:
        """Every engine path of the family of the column ``policy``, whatever its label."""
        return self.family_paths(split_label(policy)[0]) if self.engine is not None else []


def sglang_session(impl: Any) -> Session:
    """SGLang's paths over the session's ``impl`` (the seam `Recording` of `SGLangImpl`, so calls are traced):
    Kimi-K3's eager (and deferred) paths, or a family's (`impl.sglang.families`); none for a family SGLang has no
    path for (its claims record n/a); any other failure to build one is the session's error, never an n/a."""

    def build(family: str) -> list[Any]:
        if family == "kimi-k3":
            from deferlab.impl.sglang.served import paths

            return list(paths(impl))
        from deferlab.impl.sglang import families as sglang_families

        if family not in sglang_families.PATHS:
            return []
        # float32: the Qwen processor's own values; the tower's BF16 is their cast, which C15 and C4 take
        options = {"dtype": "float32"} if sglang_families.PATHS[family].companions else {}
        return list(sglang_families.paths(impl, family, **options))

    return Session("sglang", build, source=getattr(impl, "source", None))


def sglang_companions(families_: Sequence[str]) -> tuple[str, ...]:
    """The companions SGLang must be loaded with for the session's families (the Qwen path's transformers and
    torchvision, at the release's pins)."""
    from deferlab.impl.sglang import families as sglang_families
    from deferlab.properties.video_claims import video_companions
    from deferlab.reference.system.engines import engine

    found = {c for f in families_ if f in sglang_families.PATHS for c in sglang_families.PATHS[f].companions}
    return tuple(sorted(found | set(video_companions(engine("sglang"), families_))))


class EngineSession(Session):
    """The session of an engine without a seam (`EngineFacts.served`): its release loaded once, with the
    companions every family of the session computes with, and its paths per family from its own ``paths``.

    The paths are asked for float32 values: vLLM's `FusedMMInputNorm.forward_native` computes in float32 and casts
    last, LMDeploy casts the finished pixels, so the BF16 the tower reads is exactly the cast of these values,
    which C15 and C4 take; and C14 can recover each served level from an increasing float32 table (semantics
    §18.6). Kimi-K3's paths also get the checkpoint oracle and the snapshot's config, as its served claims do."""

    def __init__(self, facts: Any, spec: str, families_: Sequence[str]) -> None:
        import importlib

        self.facts = facts
        self.served = importlib.import_module(facts.served)
        from deferlab.properties.video_claims import video_companions

        companions = getattr(self.served, "COMPANIONS", {})
        wanted = sorted({c for f in families_ for c in companions.get(f, ())} | set(video_companions(facts, families_)))
        self.source = importlib.import_module(facts.sources).load(spec, companions=tuple(wanted))
        self.anchor = _Anchor(self.source, facts.name)
        snapshot = checkpoint_snapshot()

        def build(family: str) -> list[Any]:
            kimi = {"checkpoint": checkpoint, "media_proc_cfg": None if snapshot is None else snapshot[1]}
            try:
                return list(self.served.paths(self.source, family, {"dtype": "float32"},
                                              **(kimi if family == "kimi-k3" else {})))  # fmt: skip
            except self.served.NotCovered:
                return []  # the release does not serve the family: its claims record n/a

        super().__init__(facts.name, build, source=self.source)

    def describe(self) -> dict[str, Any]:
        return {"engine": self.facts.name, "system": self.source.name, "spec": self.source.spec,
                **self.source.describe()}  # fmt: skip


class _Anchor:
    """What the session's real-code record (`seam.ACTIVE`) names: the loaded source."""

    real_code = True

    def __init__(self, source: Any, engine: str) -> None:
        self.source = source
        self.engine = engine

    def describe(self) -> dict[str, Any]:
        return {"engine": self.engine, "system": self.source.name}


def engine_session(facts: Any, spec: str, families_: Sequence[str] | None = None) -> EngineSession:
    """The session of engine ``facts`` at ``spec`` for the families asked (default every family it can serve)."""
    from deferlab.reference.system.families import FAMILIES

    return EngineSession(facts, spec, list(families_ or FAMILIES))


def vllm_session(spec: str, families_: Sequence[str] | None = None) -> EngineSession:
    """vLLM's session (`engine_session`), for the callers that name it."""
    from deferlab.reference.system.engines import engine

    return engine_session(engine("vllm"), spec, families_)


def provenance(paths: Sequence[ServedPath]) -> dict[str, str]:
    """What ran behind each path, per step (recorded beside the verdict)."""
    return {f"{p.name}: {step}": what for p in paths for step, what in sorted(p.provenance().items())}


def describe_error(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {(lines[0] if lines else '')[:200]}"


def problems(paths: Sequence[ServedPath], problem: Callable[[ServedPath], str | None], prefix: str) -> None:
    """Run ``problem`` on every path; one AssertionError ``prefix: path: what; path: what`` if any path fails."""
    found = [p for p in (problem(path) for path in paths) if p]
    if found:
        raise AssertionError(f"{prefix}: " + "; ".join(found))


# --- C13: geometry ------------------------------------------------------------------------------------------------


def geometry_problem(path: ServedPath, width: int, height: int, cfg: PreprocessConfig) -> str | None:
    """The path's resize target, pads, implied grid and prompt tokens against the checkpoint's (§3.2, §11.1)."""
    rc = checkpoint.resize_config(width, height, cfg)
    want = (rc.new_width, rc.new_height, rc.pad_width, rc.pad_height)
    got = tuple(int(v) for v in path.geometry(width, height, cfg))
    tokens, want_tokens = int(path.num_tokens(width, height, cfg)), checkpoint.num_tokens(width, height, cfg)
    p = cfg.patch_size
    padded = (got[1] + got[3], got[0] + got[2])
    grid = (1, padded[0] // p, padded[1] // p) if not (padded[0] % p or padded[1] % p) else None
    wrong = []
    if got != want:
        wrong.append(f"geometry (new_w, new_h, pad_w, pad_h) {got} != checkpoint's {want}")
    if grid != tuple(rc.grid_thw):
        wrong.append(f"implied grid {grid} != checkpoint's {tuple(rc.grid_thw)}")
    if tokens != want_tokens:
        wrong.append(f"{tokens} prompt tokens != checkpoint's {want_tokens}")
    return f"{path.name}: " + ", ".join(wrong) if wrong else None


# --- Levels and ulps off served values (§16.5) ----------------------------------------------------------------------


def table_config(cfg: PreprocessConfig) -> PreprocessConfig:
    """``cfg`` with one 16x16 patch and limits that keep a 16x16 image unresized: the levels image is served as is."""
    return replace(
        cfg, patch_size=16, merge_kernel_size=1, in_patch_limit=1, patch_limit_on_one_side=1, fixed_output_tokens=None
    )


@lru_cache(maxsize=256)
def level_table(path: ServedPath, cfg: PreprocessConfig) -> np.ndarray:
    """(3, 256) float32: what ``path`` serves for each level of each channel (the levels image, served as is)."""
    image = Image.fromarray(skew.level_probe(), "RGB")
    values, grids = path.serve([image], table_config(cfg))
    if values.shape != (1, 3, 16, 16) or np.asarray(grids).tolist() != [[1, 1, 1]]:
        raise RuntimeError(f"{path.name}: the 16x16 levels image came back {values.shape}, grid {grids}, not 1 patch")
    table = np.ascontiguousarray(skew.table_from_probe(values[0]))
    if not (np.diff(table.astype(np.float64), axis=1) > 0).all():
        raise RuntimeError(f"{path.name}: its normalization is not increasing in the level, levels cannot be recovered")
    return table


def recover_levels(values: np.ndarray, table: np.ndarray) -> np.ndarray:
    """uint8 like ``values`` (N, 3, p, p): `skew.recover_levels` (nearest level of that channel's ``table``) in
    the patch layout."""
    return skew.recover_levels(values.transpose(1, 0, 2, 3), table).transpose(1, 0, 2, 3)


def allowance(table: np.ndarray) -> np.ndarray:
    """(3,) float64: the C14 allowance (b) per channel, `ALLOWANCE_ULPS` ulps at the channel's largest value."""
    return ALLOWANCE_ULPS * np.spacing(np.abs(table).max(axis=1).astype(np.float32)).astype(np.float64)


def level_patches(image: Any, cfg: PreprocessConfig) -> np.ndarray:
    """uint8 (N, 3, p, p): the checkpoint's levels (`checkpoint.levels`) in the served patch layout."""
    hwc = checkpoint.levels(image, cfg)
    return patchify(np.ascontiguousarray(hwc.transpose(2, 0, 1), dtype=np.float32), cfg.patch_size).astype(np.uint8)


@dataclass(frozen=True)
class Trained:
    """The checkpoint's answer for one image: pixel values, grids, levels (patch layout), normalization table."""

    values: np.ndarray
    grids: np.ndarray
    levels: np.ndarray
    table: np.ndarray

    @classmethod
    def of(cls, image: Any, cfg: PreprocessConfig) -> Trained:
        values, grids = checkpoint.preprocess([image], cfg)
        return cls(values, grids, level_patches(image, cfg), checkpoint.normalization_table(cfg))


@dataclass(frozen=True)
class PixelReport:
    """How one path's values compare with the checkpoint's, element by element (§16.2's rule): Kimi-K3's here,
    the families' (`properties.families.compare`) too. ``max_ulps`` is None where the harness measures no ulps
    (the families'); their wording stays as their recorded failure signatures have it."""

    total: int
    differing: int
    unexplained: int
    max_levels: int
    max_ulps: int | None
    first: str

    def __str__(self) -> str:
        spread = f"{self.max_levels} levels off"
        spread = f", up to {spread}" if self.max_ulps is None else f"; up to {spread} and {self.max_ulps} ulps"
        head = f"{self.unexplained} of {self.total} values unexplained"
        return f"{head} ({self.differing} differ{spread}; first {self.first})"


def compare(values: np.ndarray, served_table: np.ndarray, trained: Trained) -> PixelReport:
    """Recover the served levels through ``served_table``; an element is explained when bitwise equal to the
    checkpoint's, or at most 1 level off with its value within `allowance` of the checkpoint's normalization of
    the served level (semantics §16.2 (a), (b))."""
    levels = recover_levels(values, served_table)
    off = np.abs(levels.astype(np.int16) - trained.levels.astype(np.int16))
    channel = np.arange(3).reshape(1, 3, 1, 1)
    reference = trained.table[channel, levels]  # the checkpoint's normalization of each served level
    err = np.abs(values.astype(np.float64) - reference.astype(np.float64))
    differ = float32_bits(values) != float32_bits(trained.values)
    bad = differ & ~((off <= 1) & (err <= allowance(trained.table).reshape(1, 3, 1, 1)))
    ulps = skew.ulp_distance(values, reference)
    first = "none"
    if bad.any():
        n, c, y, x = (int(i) for i in np.argwhere(bad)[0])
        first = f"patch {n} channel {c} ({y}, {x}): level {levels[n, c, y, x]} served, {trained.levels[n, c, y, x]}"
        first += " trained"
    return PixelReport(
        int(values.size), int(differ.sum()), int(bad.sum()), int(off.max(initial=0)), int(ulps.max(initial=0)), first
    )


def pixel_problem(path: ServedPath, image: Any, cfg: PreprocessConfig, trained: Trained) -> str | None:
    """C14 on one path: it serves the image, with the checkpoint's grid, every differing value explained."""
    try:
        values, grids = path.serve([image], cfg)
    except Exception as e:  # a refusal or crash: the checkpoint serves this input, so it is a difference
        return f"{path.name} cannot serve it ({describe_error(e)})"
    if np.asarray(grids).tolist() != trained.grids.tolist() or values.shape != trained.values.shape:
        return f"{path.name}: grid {np.asarray(grids).tolist()} {values.shape} != checkpoint's {trained.grids.tolist()}"
    report = compare(values, level_table(path, cfg), trained)
    return f"{path.name}: {report}" if report.unexplained else None


# --- C15: normalization -------------------------------------------------------------------------------------------


def normalization_problem(path: ServedPath, cfg: PreprocessConfig) -> str | None:
    """C15 on one path: its 256 x 3 values bitwise the checkpoint's (§11.3), in FP32 and after the BF16 cast."""
    served, trained = level_table(path, cfg), checkpoint.normalization_table(cfg)
    fp32 = (float32_bits(served) != float32_bits(trained)).any(axis=0)
    bf16 = (bf16_bits(served) != bf16_bits(trained)).any(axis=0)
    if not (fp32.any() or bf16.any()):
        return None
    ulps = int(skew.ulp_distance(served, trained).max())
    first = int(np.flatnonzero(fp32)[0]) if fp32.any() else int(np.flatnonzero(bf16)[0])
    return (
        f"{path.name}: {int(fp32.sum())} of 256 levels differ from the checkpoint in FP32 (up to {ulps} ulps, "
        f"first level {first}), {int(bf16.sum())} of 256 after BF16"
    )


def stats_prefix(cfg: PreprocessConfig) -> str:
    def fmt(v: Sequence[float]) -> str:
        return "(" + ", ".join(f"{x:.9g}" for x in v) + ")"

    return f"[mean {fmt(cfg.image_mean)} std {fmt(cfg.image_std)}] 256 levels x 3 channels"


class CheckpointPath:
    """The checkpoint oracle as a `ServedPath`: what the claims' checks must accept (they can tell the truth)."""

    label, path, system, dtype, real_code = "CHECKPOINT", "trained", "checkpoint-oracle", "float32", False
    name = "checkpoint-oracle (trained)"

    def serve(self, images: Sequence[Any], cfg: PreprocessConfig) -> tuple[np.ndarray, np.ndarray]:
        return checkpoint.preprocess(images, cfg)

    def num_tokens(self, width: int, height: int, cfg: PreprocessConfig) -> int:
        return checkpoint.num_tokens(width, height, cfg)

    def geometry(self, width: int, height: int, cfg: PreprocessConfig) -> tuple[int, int, int, int]:
        rc = checkpoint.resize_config(width, height, cfg)
        return rc.new_width, rc.new_height, rc.pad_width, rc.pad_height

    def provenance(self) -> dict[str, str]:
        return {"serve": "deferlab.reference.oracle.checkpoint.preprocess"}
