"""MiniCPM-V 4.6's family config type (semantics §18.9): the rescale and normalize of a `NormConfig` and the slicing
geometry of transformers' ``MiniCPMV4_6ImageProcessor`` (`reference.oracle.minicpm_v`).

Why a factory in its own module: `reference.system.family_configs` is at its size cap, and the type subclasses its
`NormConfig` (so every reader of a normalization config takes it) while that module registers the type: this one
imports nothing of it (no import cycle), and `family_configs` builds the type on its own `NormConfig`
(``MiniCPMVConfig``, importable and picklable from there).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from deferlab.reference.system import family_configs_read as read
from deferlab.reference.system.errors import ConfigError, InputTypeError, InputValueError
from deferlab.reference.system.validate import check_positive_int

__all__ = ["DOWNSAMPLE_MERGE", "config_type"]

DOWNSAMPLE_MERGE = {"16x": 4, "4x": 2}  # the processor's side divisor is patch x this (its two 2x2 merges, or one)
_GEOMETRY = ("max_slice_nums", "scale_resolution", "patch_size")
HOME = "deferlab.reference.system.family_configs"  # where the built type is bound (its pickling name)


def config_type(base: Any) -> Any:
    """``MiniCPMVConfig`` on ``base`` (`family_configs.NormConfig`): its five normalization fields and checks, and
    transformers 5.24.0's class defaults for the slicing (9 slices, 448, patch 14, ``16x``)."""

    @dataclass(frozen=True)
    class MiniCPMVConfig(base):  # type: ignore[misc, valid-type]
        """transformers' ``MiniCPMV4_6ImageProcessor`` settings (semantics §18.9): a `NormConfig` and its slicing."""

        kind: ClassVar[str] = "minicpmv"  # the family kind this type is (`family_configs.CONFIG_TYPES`)

        max_slice_nums: int = 9
        scale_resolution: int = 448
        patch_size: int = 14
        downsample_mode: str = "16x"

        def __post_init__(self) -> None:
            super().__post_init__()
            for key in _GEOMETRY:
                object.__setattr__(self, key, check_positive_int(key, getattr(self, key)))
            if self.downsample_mode not in DOWNSAMPLE_MERGE:
                accepted = ", ".join(DOWNSAMPLE_MERGE)
                raise InputValueError(f"downsample_mode: {self.downsample_mode!r}; accepted: {accepted}")

        @property
        def merge(self) -> int:
            """The side divisor over the patch: 4 for ``16x``, 2 for ``4x``."""
            return DOWNSAMPLE_MERGE[self.downsample_mode]

        @property
        def norm(self) -> Any:
            """The rescale and normalize alone (§18.1's arithmetic), as `ErnieVLConfig.norm` gives them."""
            return base(self.image_mean, self.image_std, self.rescale_factor, self.do_rescale, self.do_normalize)

        @classmethod
        def from_preprocessor_config(cls, cfg: Mapping[str, Any], *, name: str = "config") -> Any:
            """The five normalization keys as `NormConfig` reads them; ``max_slice_nums``, ``scale_resolution``,
            ``patch_size`` and ``downsample_mode`` where the config has them, else the class's."""
            geometry = {k: cfg[k] for k in (*_GEOMETRY, "downsample_mode") if cfg.get(k) is not None}
            try:
                return cls(**read.values(cfg, read.NORM_KEYS, name), **geometry)
            except ConfigError:
                raise
            except (InputValueError, InputTypeError) as e:
                raise ConfigError(f"preprocessor config {name!r}: {e}") from None

    MiniCPMVConfig.__module__, MiniCPMVConfig.__qualname__ = HOME, "MiniCPMVConfig"
    return MiniCPMVConfig
