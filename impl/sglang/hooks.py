"""SGLang's answers to the few questions deferlab's engine-free code asks of an engine (`EngineFacts.hooks`): the
release a check loads by default, the modules a mutation campaign probes, its Kimi-K3 paths (the report's served
and sweep steps), the family paths of the report's skew table and their companions, and the functions C13's
exhaustive sweeps compile.

Why here: each answer is SGLang's own (its driver's modules, its family paths), so the code asking
(`properties.engines`, `properties.family_geometry`, `reports.mutate.select`, `reports.report.served.family`,
`reports.report.served.paths`, `reports.report.sweeps.geometry`) reads it through the registry instead of testing
the engine's name. Imports are inside the functions: the registry names this module without loading SGLang's
driver.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any


def default_version() -> str:
    """The release a check loads when ``DEFERLAB_SGLANG`` does not name one (`properties.engines.default_spec`)."""
    from deferlab.impl.sglang.driver import DEFAULT_VERSION

    return DEFAULT_VERSION


def probed_modules() -> list[str]:
    """The modules whose functions a mutation campaign's reference run probes: the loader's required, optional and
    whitelist modules and the kernel package its normalization calls."""
    from deferlab.impl.sglang import sources

    return [*sources.REQUIRED, *sources.OPTIONAL, *sources.WHITELIST, "sglang.kernels.ops.mm.process"]


def kimi_paths(spec: str, media_proc_cfg: dict[str, Any] | None, checkpoint: Any) -> list[Any]:
    """SGLang ``spec``'s Kimi-K3 paths, loaded in the calling process: eager, and deferred where the release has it
    (the report's SGLang child, which answers its served and sweep steps: `reports.report.served.kimi`). SGLang builds its processor from the config
    itself, so the snapshot's ``media_proc_cfg`` and the checkpoint oracle are not used."""
    from deferlab.impl.sglang.driver import SGLangImpl
    from deferlab.impl.sglang.served import paths

    return paths(SGLangImpl(spec))


def table_paths(spec: str, family: str) -> list[Any] | str:
    """SGLang's float32 paths of ``family`` on the loaded ``spec`` (the report's skew table), or the ``n/a`` line."""
    from deferlab.impl.sglang import families as sglang_families
    from deferlab.impl.sglang.sources import load
    from deferlab.reference.system import families

    if family not in sglang_families.PATHS:
        return f"n/a: deferlab runs no SGLang path of {families.family(family).display}"
    spec_of = sglang_families.PATHS[family]
    options = {"dtype": "float32"} if spec_of.companions else {}
    return list(sglang_families.paths(load(spec, companions=spec_of.companions), family, **options))


def table_companions(names: Sequence[str]) -> tuple[str, ...]:
    """The companions SGLang's paths of ``names`` compute with (the one load must have them all)."""
    from deferlab.impl.sglang.families import PATHS

    return tuple(sorted({c for f in names if f in PATHS for c in PATHS[f].companions}))


K25 = "sglang.srt.multimodal.processors.kimi_k25"


def kimi_geometry_function(path: Any) -> Callable[..., Any] | None:
    """The Kimi navit geometry function an SGLang path serves with (``navit_resize_config`` of its Kimi-K2.5
    processor module), or None for a path that is not SGLang's real code (`reports.report.sweeps.geometry`)."""
    impl_source = getattr(getattr(path, "impl", None), "source", None)
    if impl_source is None or not getattr(path, "real_code", False):
        return None
    return impl_source.module(K25).navit_resize_config


def geometry_function(path: Any, cfg: Any) -> tuple[str, str, Callable[..., Any], tuple[Any, ...]] | tuple[str, str]:
    """(module, name, function, arguments) C13's exhaustive sweep compiles for ``path``, or (what runs, why nothing
    is compiled): Qwen's ``smart_resize`` of the image processor's module; InternVL's ``dynamic_preprocess`` tiles a
    torch tensor, which numba does not compile."""
    if cfg.kind in ("qwen", "paddleocr"):  # both: the image processor module's smart_resize(h, w, f, min, max)
        ip = path.processor(cfg)._processor.image_processor
        module = type(ip).__module__
        return module, "smart_resize", sys.modules[module].smart_resize, (cfg.factor, cfg.min_pixels, cfg.max_pixels)
    return (
        f"{path.system} InternVLProcessor.dynamic_preprocess (through the path's geometry)",
        "SGLang's dynamic_preprocess tiles a torch tensor: numba compiles no torch, so nothing is compiled",
    )
