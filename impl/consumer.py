"""Consumer side of the deferred contract (semantics §5, §6): what the owner reads from an item.

Separate from `impl.producer` on purpose (see there). The consumer accepts
either form a producer may write (dict or dataclass), and reads ``backend``
only when the policy says the consumer version did: INTERIM_418975B with a
non-EPD producer then raises ``KeyError('backend')``, as upstream did.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from deferlab.impl.items import KimiK3DeferredPreprocessing
from deferlab.reference.system.config import ResizeConfig
from deferlab.reference.system.policies import Policy


@dataclass(frozen=True)
class DeferredView:
    """What the owner uses from one deferred config, whatever form it travelled in."""

    backend: str
    image_mean: tuple[float, ...]
    image_std: tuple[float, ...]
    transparent_bg_config: Mapping[str, Any] | None
    resize_config: ResizeConfig


def read_deferred(
    cfg: Mapping[str, Any] | KimiK3DeferredPreprocessing, policy: Policy, patch_size: int
) -> DeferredView:
    """Read a deferred config the way the ``policy``'s consumer version did (dict subscripts or attributes)."""
    if isinstance(cfg, KimiK3DeferredPreprocessing):
        return DeferredView(
            cfg.backend,
            tuple(cfg.image_mean),
            tuple(cfg.image_std),
            cfg.transparent_bg_config,
            ResizeConfig.from_dict(cfg.resize_config, patch_size=patch_size),
        )
    if not isinstance(cfg, Mapping):
        raise TypeError(f"deferred config must be a dict or KimiK3DeferredPreprocessing, got {type(cfg).__name__}")
    backend = cfg["backend"] if policy.consumer_reads_backend else "gpu"
    return DeferredView(
        backend,
        tuple(cfg["image_mean"]),
        tuple(cfg["image_std"]),
        cfg["transparent_bg_config"],
        ResizeConfig.from_dict(cfg["resize_config"], patch_size=patch_size),
    )


class _RecordingConfig(Mapping[str, Any]):
    """A dict-form config that remembers which keys the consumer subscripted."""

    _SAMPLE: dict[str, Any] = {
        "backend": "gpu",
        "feature_layout": "chw",
        "image_mean": (0.5, 0.5, 0.5),
        "image_std": (0.5, 0.5, 0.5),
        "transparent_bg_config": None,
        "resize_config": {"num_tokens": 1, "new_width": 2, "new_height": 2, "pad_width": 0, "pad_height": 0},
    }

    def __init__(self) -> None:
        self.read: set[str] = set()

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return self._SAMPLE[key]

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._SAMPLE)

    def __len__(self) -> int:
        return len(self._SAMPLE)


def consumer_reads(policy: Policy) -> frozenset[str]:
    """The keys the ``policy``'s consumer subscripts from a dict-form config.

    Derived by running `read_deferred` on a recording mapping, so it cannot
    drift from what the consumer really reads.
    """
    cfg = _RecordingConfig()
    read_deferred(cfg, policy, patch_size=1)
    return frozenset(cfg.read)
