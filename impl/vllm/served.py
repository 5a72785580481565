"""vLLM's paths for a model family at one release: what the pytest fixtures ask for (`paths`).

Why one entry point: the served claims run every path a system serves a family with, and which paths those are
is the release's business (its default ``mm_device_do_normalize`` for the family's model class) and the user's
(their serving settings). `paths` returns, with no ``device_normalize`` set, the release's default path
(``VLLM``) and, where that default finishes on the device, the host-normalized row beside it
(``VLLM host-normalized``); with ``device_normalize`` set, the one path that setting gives. A family or release
no path covers raises `NotCovered` in one line (the claims read it as ``n/a``).

The vLLM tree is loaded with the companions the family's path computes with (`impl.loader.companions`:
transformers and torchvision for Qwen and InternVL; none for Kimi-K3 and the normalization-only families).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from deferlab.impl.vllm import serving, sources
from deferlab.impl.vllm.family import NormPath, NotCovered
from deferlab.impl.vllm.plugin import ENGINE, NORM
from deferlab.impl.vllm.sources import Source
from deferlab.reference.system.errors import InputTypeError, InputValueError
from deferlab.reference.system.families import FAMILIES as REGISTRY

# The normalization-only families: vLLM's model class (architecture, source file) from the plugin's one table
# (`impl.vllm.plugin.NORM`, whence their registry rows too) and the family's display name.
NORM_FAMILIES: dict[str, tuple[serving.ModelClass, str]] = {
    name: (serving.ModelClass(architecture, f"vllm/model_executor/models/{module}.py"), REGISTRY[name].display)
    for name, (architecture, module, _) in NORM.items()
}
FULL_FAMILIES = ("kimi-k3", "qwen2.5-vl", "qwen3-vl", "internvl")
# Every family the plugin declares a path for, in its order (the full ones first).
FAMILIES = tuple(dict.fromkeys(name for name, _ in ENGINE.serves))
# The libraries each family's path computes with, at the release's pins (the others need none).
COMPANIONS = {name: ("transformers", "torchvision") for name in ("qwen2.5-vl", "qwen3-vl", "internvl")}


def settings_of(settings: serving.Settings | Mapping[str, Any] | None) -> serving.Settings:
    """`serving.Settings` from a `Settings`, a mapping of its fields, or None (vLLM's defaults)."""
    if settings is None or isinstance(settings, serving.Settings):
        return settings or serving.Settings()
    if not isinstance(settings, Mapping):
        raise InputTypeError(f"settings must be a Settings or a mapping of its fields, got {type(settings).__name__}")
    unknown = sorted(set(settings) - {"device_normalize", "processor_kwargs", "dtype"})
    if unknown:
        raise InputValueError(
            f"unknown serving settings {unknown}; accepted: device_normalize, processor_kwargs, dtype"
        )
    return serving.Settings(**settings)


def one(source: Source, family: str, settings: serving.Settings, **kimi: Any) -> Any:
    """The path of ``family`` under ``settings`` on the loaded ``source``."""
    if family == "kimi-k3":
        from deferlab.impl.vllm.driver import VLLMPath

        return VLLMPath(
            source,
            device_normalize=settings.device_normalize,
            processor_kwargs=settings.processor_kwargs,
            dtype=settings.dtype,
            **kimi,
        )
    if family in ("qwen2.5-vl", "qwen3-vl"):
        from deferlab.impl.vllm.qwen import QwenPath

        return QwenPath(source, family, settings)
    if family == "internvl":
        from deferlab.impl.vllm.internvl import InternVLPath

        return InternVLPath(source, family, settings)
    if family in NORM_FAMILIES:
        model, display = NORM_FAMILIES[family]
        return NormPath(source, family, model, display, settings)
    raise NotCovered(f"n/a: no vLLM path for model family {family!r}; accepted: {', '.join(FAMILIES)}")


def paths(
    spec: str | Source,
    family: str,
    settings: serving.Settings | Mapping[str, Any] | None = None,
    *,
    checkpoint: Any = None,
    media_proc_cfg: dict[str, Any] | None = None,
) -> list[Any]:
    """vLLM's paths for ``family`` at ``spec`` (see the module docstring); Kimi-K3's take ``checkpoint`` (the
    pipeline of the releases that serve the checkpoint's remote code) and ``media_proc_cfg`` (a snapshot's)."""
    chosen = settings_of(settings)
    if family not in FAMILIES:
        raise NotCovered(f"n/a: no vLLM path for model family {family!r}; accepted: {', '.join(FAMILIES)}")
    wanted = COMPANIONS.get(family, ())
    source = sources.load(spec.spec if isinstance(spec, Source) else spec, companions=wanted)
    kimi = {"checkpoint": checkpoint, "media_proc_cfg": media_proc_cfg} if family == "kimi-k3" else {}
    first = one(source, family, chosen, **kimi)
    found = [first]
    if chosen.device_normalize is None and first.device_normalize and family not in NORM_FAMILIES:
        found.append(one(source, family, chosen.replace(device_normalize=False), **kimi))
    return found
