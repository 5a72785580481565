"""Shared configuration types: the one place every package takes them from.

`PreprocessConfig` mirrors a checkpoint's ``media_proc_cfg`` (semantics §2);
`ResizeConfig` is the NaViT resize decision for one image (semantics §3.2). Both are
frozen and validated on construction, so a bad value fails at the front door
with a message naming the field, the value and what is accepted, before any
pixel is touched. ``impl``, ``sim``, ``properties`` and ``reports`` import
these types; the reference's *algorithms* live in other modules.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from deferlab.reference.system.errors import ConfigError, InputTypeError
from deferlab.reference.system.validate import (
    check_bool,
    check_choice,
    check_keys,
    check_level,
    check_mapping,
    check_optional_positive_int,
    check_positive_int,
    check_vector3,
)

BACKGROUND_PATTERNS = ("chessboard", "white", "black", "gray")
# ``transparent_bg_fill_stage``: where the checkpoint's processor composites (semantics §2.1, §11.1).
FILL_STAGES = ("after_resize", "before_resize")

# Pillow raises DecompressionBombError above twice MAX_IMAGE_PIXELS (89,478,485);
# we refuse images above that same count unless a config says otherwise.
DEFAULT_MAX_PIXELS = 2 * 89_478_485

_MEDIA_KEYS = (
    "patch_size",
    "merge_kernel_size",
    "in_patch_limit",
    "patch_limit_on_one_side",
    "fixed_output_tokens",
    "image_mean",
    "image_std",
    "transparent_bg_config",
    "transparent_bg_fill_stage",
)


REQUIRED_MEDIA_KEYS = (
    "patch_size",
    "merge_kernel_size",
    "in_patch_limit",
    "patch_limit_on_one_side",
    "image_mean",
    "image_std",
)
# Keys published Kimi checkpoints carry that image preprocessing here does not read (semantics §2.2).
IGNORED_MEDIA_KEYS = frozenset(
    {
        "in_patch_limit_each_frame",
        "in_patch_limit_video",
        "sample_fps",
        "max_num_frames_each_video",
        "temporal_merge_kernel_size",
        "timestamp_mode",
        "config_type",
    }
)
# The checkpoint's ``transparent_bg_config`` key of each `BackgroundConfig` field: ``chessboard_`` and the field's
# name, but for ``pattern``.
_BACKGROUND_KEYS = {
    name: name if name == "pattern" else f"chessboard_{name}"
    for name in ("pattern", "square_size", "white_value", "gray_value", "square_on_top_left")
}
# The five keys of a ``resize_config`` upstream writes into the contract, in its order (`ResizeConfig` fields).
_RESIZE_KEYS = ("num_tokens", "new_width", "new_height", "pad_width", "pad_height")


@dataclass(frozen=True)
class BackgroundConfig:
    """The ``transparent_bg_config`` of a checkpoint (semantics §3.4).

    Defaults are the checkpoint dataclass's and SGLang's ``.get`` defaults:
    a missing ``pattern`` means black, the chessboard is 16 px, 255 / 200.
    """

    pattern: str = "black"
    square_size: int = 16
    white_value: int = 255
    gray_value: int = 200
    square_on_top_left: bool = True

    def __post_init__(self) -> None:
        check_choice("transparent_bg_config.pattern", self.pattern, BACKGROUND_PATTERNS)
        square = check_positive_int("transparent_bg_config.chessboard_square_size", self.square_size)
        object.__setattr__(self, "square_size", square)
        object.__setattr__(
            self, "white_value", check_level("transparent_bg_config.chessboard_white_value", self.white_value)
        )
        object.__setattr__(
            self, "gray_value", check_level("transparent_bg_config.chessboard_gray_value", self.gray_value)
        )
        top_left = check_bool("transparent_bg_config.chessboard_square_on_top_left", self.square_on_top_left)
        object.__setattr__(self, "square_on_top_left", top_left)

    @classmethod
    def from_dict(cls, cfg: Mapping[str, Any]) -> BackgroundConfig:
        """Read the checkpoint's key names; a missing key takes the field's default (SGLang's ``.get`` default),
        unknown keys are ignored as upstream does."""
        if not isinstance(cfg, Mapping):
            raise InputTypeError(f"transparent_bg_config must be a dict or None, got {cfg!r}")
        return cls(**{name: cfg[key] for name, key in _BACKGROUND_KEYS.items() if key in cfg})

    def to_dict(self) -> dict[str, Any]:
        """The checkpoint-style dict that travels in the deferred contract."""
        return {key: getattr(self, name) for name, key in _BACKGROUND_KEYS.items()}


@dataclass(frozen=True)
class ResizeConfig:
    """One image's NaViT decision (semantics §3.2): target size, bottom/right pad, tokens."""

    new_width: int
    new_height: int
    pad_width: int
    pad_height: int
    num_tokens: int
    patch_size: int  # the checkpoint's (semantics §3.2): the grid is the padded size over it, so no default

    @property
    def padded_width(self) -> int:
        return self.new_width + self.pad_width

    @property
    def padded_height(self) -> int:
        return self.new_height + self.pad_height

    @property
    def grid_thw(self) -> tuple[int, int, int]:
        """(1, padded_h // patch, padded_w // patch), as `_grid_thw_from_resize_config`."""
        return (1, self.padded_height // self.patch_size, self.padded_width // self.patch_size)

    @property
    def num_patches(self) -> int:
        return self.grid_thw[1] * self.grid_thw[2]

    def to_dict(self) -> dict[str, int]:
        """The five upstream keys, as the producer writes them into the contract."""
        return {key: getattr(self, key) for key in _RESIZE_KEYS}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], patch_size: int) -> ResizeConfig:
        missing = [k for k in _RESIZE_KEYS if k not in d]
        if missing:
            raise ConfigError(f"resize_config is missing {missing}; it has {sorted(d)}")
        return cls(**{key: int(d[key]) for key in _RESIZE_KEYS}, patch_size=patch_size)


@dataclass(frozen=True)
class PreprocessConfig:
    """A checkpoint's image preprocessing configuration (semantics §2), validated.

    ``max_pixels`` is deferlab's own front-door cap (like Pillow's
    ``MAX_IMAGE_PIXELS``); ``None`` disables it. ``fill_stage`` is the
    checkpoint's ``transparent_bg_fill_stage``: SGLang never reads it
    (semantics §3.4), the checkpoint's processor does (§11.1); ``None`` means
    the config does not state it.
    """

    patch_size: int = 14
    merge_kernel_size: int = 2
    in_patch_limit: int = 65536
    patch_limit_on_one_side: int = 512
    fixed_output_tokens: int | None = None
    image_mean: tuple[float, float, float] = (0.5, 0.5, 0.5)
    image_std: tuple[float, float, float] = (0.5, 0.5, 0.5)
    background: BackgroundConfig | None = None
    fill_stage: str | None = None
    max_pixels: int | None = DEFAULT_MAX_PIXELS
    name: str = field(default="custom", compare=False)

    def __post_init__(self) -> None:
        for key in ("patch_size", "merge_kernel_size", "in_patch_limit", "patch_limit_on_one_side"):
            object.__setattr__(self, key, check_positive_int(key, getattr(self, key)))
        for key in ("fixed_output_tokens", "max_pixels"):
            object.__setattr__(self, key, check_optional_positive_int(key, getattr(self, key)))
        object.__setattr__(self, "image_mean", check_vector3("image_mean", self.image_mean))
        object.__setattr__(self, "image_std", check_vector3("image_std", self.image_std, positive=True))
        if self.background is not None and not isinstance(self.background, BackgroundConfig):
            if isinstance(self.background, Mapping):
                object.__setattr__(self, "background", BackgroundConfig.from_dict(self.background))
            else:
                raise InputTypeError(f"background must be a BackgroundConfig, a dict or None, got {self.background!r}")
        if self.fill_stage is not None:
            check_choice("fill_stage (transparent_bg_fill_stage)", self.fill_stage, FILL_STAGES)

    @property
    def factor(self) -> int:
        """merge_kernel_size * patch_size: the side every padded image is a multiple of."""
        return self.merge_kernel_size * self.patch_size

    @property
    def transparent_bg_config(self) -> dict[str, Any] | None:
        return None if self.background is None else self.background.to_dict()

    def with_(self, **changes: Any) -> PreprocessConfig:
        """A validated copy with some fields changed."""
        return replace(self, **changes)

    @classmethod
    def from_media_proc_cfg(
        cls, cfg: Mapping[str, Any], *, name: str = "custom", strict: bool = True
    ) -> PreprocessConfig:
        """Build from a checkpoint ``media_proc_cfg`` dict.

        The geometry and normalization keys are required: a file that lacks
        them (or misspells one) must not silently become Kimi-K3. Keys a real
        checkpoint carries that this pipeline does not use (video settings,
        ``config_type``) are accepted; any other key is an error unless
        ``strict=False``. The fill stage is read into ``fill_stage``.
        """
        check_mapping("media_proc_cfg", cfg)
        missing = [k for k in REQUIRED_MEDIA_KEYS if k not in cfg]
        if missing:
            raise ConfigError(
                f"media_proc_cfg {name!r} is missing required keys {missing}; it has {sorted(cfg)} "
                f"(required: {list(REQUIRED_MEDIA_KEYS)})"
            )
        if strict:
            allowed = set(_MEDIA_KEYS) | IGNORED_MEDIA_KEYS | {"max_pixels"}
            try:
                check_keys(f"media_proc_cfg {name!r}", cfg, allowed=allowed)
            except ValueError as e:
                raise ConfigError(f"{e} (the ignored checkpoint keys are accepted; or pass strict=False)") from None
        kwargs: dict[str, Any] = {}
        for key in _MEDIA_KEYS[:5]:
            if key in cfg:
                kwargs[key] = cfg[key]
        for key in ("image_mean", "image_std"):
            if key in cfg:
                kwargs[key] = tuple(cfg[key]) if isinstance(cfg[key], list) else cfg[key]
        bg = cfg.get("transparent_bg_config")
        kwargs["background"] = None if bg is None else BackgroundConfig.from_dict(bg)
        if "max_pixels" in cfg:
            kwargs["max_pixels"] = cfg["max_pixels"]
        kwargs["fill_stage"] = cfg.get("transparent_bg_fill_stage")
        return cls(name=name, **kwargs)

    @classmethod
    def from_json(cls, path: str | Path, *, strict: bool = True) -> PreprocessConfig:
        """Read a ``preprocessor_config.json``-style file (flat, or under ``media_proc_cfg``)."""
        p = Path(path)
        try:
            data = json.loads(p.read_text())
        except FileNotFoundError:
            raise ConfigError(f"config file {str(p)!r} does not exist") from None
        except IsADirectoryError:
            raise ConfigError(f"config file {str(p)!r} is a directory, not a JSON file") from None
        except json.JSONDecodeError as e:
            raise ConfigError(f"config file {str(p)!r} is not valid JSON: {e}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"config file {str(p)!r} must hold a JSON object, got {type(data).__name__}")
        nested = isinstance(data.get("media_proc_cfg"), dict)
        if nested:
            data = data["media_proc_cfg"]
        elif not any(k in data for k in REQUIRED_MEDIA_KEYS):
            raise ConfigError(
                f"config file {str(p)!r} has neither a 'media_proc_cfg' object nor its keys at the top level "
                f"(required: {list(REQUIRED_MEDIA_KEYS)}); top-level keys: {sorted(data)}"
            )
        # A full preprocessor_config.json has processor keys beside media_proc_cfg; inside it, be strict.
        return cls.from_media_proc_cfg(data, name=p.stem, strict=strict)

    def to_media_proc_cfg(self) -> dict[str, Any]:
        """The checkpoint-style dict (round-trips through `from_media_proc_cfg`)."""
        return {
            "patch_size": self.patch_size,
            "merge_kernel_size": self.merge_kernel_size,
            "in_patch_limit": self.in_patch_limit,
            "patch_limit_on_one_side": self.patch_limit_on_one_side,
            "fixed_output_tokens": self.fixed_output_tokens,
            "image_mean": list(self.image_mean),
            "image_std": list(self.image_std),
            "transparent_bg_config": self.transparent_bg_config,
            "transparent_bg_fill_stage": self.fill_stage,
            "max_pixels": self.max_pixels,
        }
