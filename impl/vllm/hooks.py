"""vLLM's answers to the few questions deferlab's engine-free code asks of an engine (`EngineFacts.hooks`): the
release a check loads by default (and loading one, and its Kimi-K3 path, for the report's served and sweep steps), the modules a mutation campaign
probes, the keys its processor reads beside a ``media_proc_cfg`` (a reproducer states them), the family paths of
the report's skew table and their companions, and the functions C13's exhaustive sweeps compile.

Why here: each answer is vLLM's own (its driver's modules, its served paths), so the code asking
(`properties.engines`, `properties.family_geometry`, `reports.mutate.select`, `reports.report.served.family`,
`reports.repro.served`, `reports.report.front`, `reports.report.sweeps.geometry`, `reports.report.served.paths`) reads it through the registry
instead of testing the engine's name. Imports are inside the functions: the registry names this module without
loading vLLM's driver.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

# The module of the image processor class vLLM's Kimi-K3 path serves with in 0.32.0 and 0.33.0 (the driver reads
# the class off the code: `impl.vllm.sources.served_processor`). A release that moves it still has its functions
# named by provenance (default targets), only not probed: their mutants then run every claim.
SERVED_PROCESSOR = "vllm.transformers_utils.processors.kimi_k25_vision_fused"
# C13's exhaustive sweep: the function each path's geometry rests on (transformers' smart_resize as the release
# imports it; InternVL's target calculation).
QWEN_GEOMETRY = {"qwen2.5-vl": ("vllm.model_executor.models.qwen2_vl", "smart_resize"),
                 "qwen3-vl": ("vllm.model_executor.models.qwen3_vl", "image_smart_resize")}  # fmt: skip
INTERNVL = "vllm.transformers_utils.processors.internvl"


def default_version() -> str:
    """The release a check loads when ``DEFERLAB_VLLM`` does not name one (`properties.engines.default_spec`)."""
    from deferlab.impl.vllm.sources import DEFAULT_VERSION

    return DEFAULT_VERSION


def probed_modules() -> list[str]:
    """The modules whose functions a mutation campaign's reference run probes: the input parser,
    ``convert_image_mode``'s module, the Kimi-K3 path and processor, and the served image processor's module."""
    from deferlab.impl.vllm import driver, sources

    return [*sources.REQUIRED, driver.K3_PROCESSOR, SERVED_PROCESSOR]


def kimi_load(spec: str) -> str | None:
    """Load vLLM ``spec`` in the calling process (the report's front-door child): None, or why it cannot be
    loaded in one line (an unknown version, a release without the Kimi-K3 path, a folder that is not a vLLM
    checkout, offline), the driver's own first line (`reports.report.front.load_kimi_or_refuse`)."""
    from deferlab.impl.vllm.sources import VLLMSourceError, load

    try:
        load(spec)
    except VLLMSourceError as e:
        return (str(e).strip().splitlines() or [type(e).__name__])[0]
    return None


def kimi_paths(spec: str, media_proc_cfg: dict[str, Any] | None, checkpoint: Any) -> list[Any]:
    """vLLM ``spec``'s one Kimi-K3 path, loaded in the calling process (the report's vLLM child, which answers its
    served and sweep steps: `reports.report.served.kimi`): built from the snapshot's ``media_proc_cfg`` as read, and handed the checkpoint
    oracle (impl never imports it) for the releases that serve the checkpoint's remote code."""
    from deferlab.impl.vllm.driver import VLLMPath

    return [VLLMPath(spec, media_proc_cfg=media_proc_cfg, checkpoint=checkpoint)]


def media_proc_defaults() -> dict[str, Any]:
    """The video keys vLLM's processor reads beside a ``media_proc_cfg``'s own (its driver's defaults): what a
    reproducer states (`reports.repro.served.media_proc_cfg`)."""
    from deferlab.impl.vllm.driver import VIDEO_DEFAULTS

    return dict(VIDEO_DEFAULTS)


def table_paths(spec: str, family: str) -> list[Any] | str:
    """vLLM's float32 paths of ``family`` on the loaded ``spec`` (the report's skew table), or the ``n/a`` line."""
    from deferlab.impl.vllm import served

    try:
        return list(served.paths(spec, family, {"dtype": "float32"}))
    except served.NotCovered as e:
        return str(e)


def table_companions(names: Sequence[str]) -> tuple[str, ...]:
    """The companions vLLM's paths of ``names`` compute with (the one load must have them all)."""
    from deferlab.impl.vllm.served import COMPANIONS

    return tuple(sorted({c for f in names for c in COMPANIONS.get(f, ())}))


def kimi_geometry_function(path: Any) -> Callable[..., Any] | str | None:
    """The Kimi navit geometry function a vLLM path serves with (``navit_resize_image`` of the module of the image
    processor class the release's Kimi-K3 path serves), why it has none (the checkpoint's remote code), or None for
    a path that is not vLLM's (`reports.report.sweeps.geometry.engine_function` asks every engine)."""
    if not hasattr(path, "serves_own_processor"):
        return None
    if not path.serves_own_processor:
        return "n/a: vLLM serves the checkpoint's own remote-code processor here (the oracle models it)"
    from deferlab.impl.vllm import sources

    source = getattr(path, "source", None)
    cls = getattr(source.module(sources.PREPROCESS), source.processor_name)
    return source.module(cls.__module__).navit_resize_image


def geometry_function(path: Any, cfg: Any) -> tuple[str, str, Callable[..., Any], tuple[Any, ...]] | tuple[str, str]:
    """(module, name, function, arguments) C13's exhaustive sweep compiles for ``path``: Qwen's resize function of
    the family's model module, with the config's factor and pixel bounds; InternVL's
    ``calculate_internvl_targets`` with the ratios, tile size and thumbnail flag the release's processor resolves."""
    if cfg.kind == "qwen":
        module, name = QWEN_GEOMETRY[path.family]
        return module, name, getattr(path.source.module(module), name), (cfg.factor, cfg.min_pixels, cfg.max_pixels)
    from deferlab.impl import compiled as gc

    _, processor = path.state(cfg)
    ip = processor.image_processor
    ratios = processor.resolve_target_ratios(use_thumbnail=False)
    if gc.numba_missing() is None:
        from numba.typed import List

        ratios = List(tuple(int(v) for v in r) for r in ratios)
    fn = path.source.module(INTERNVL).calculate_internvl_targets
    return INTERNVL, "calculate_internvl_targets", fn, (ratios, int(ip.image_size), bool(ip.use_thumbnail))
