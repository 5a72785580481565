"""How a family's published config is read (semantics §18.1): the class a config names, transformers' defaults
for what it leaves out, and the values each config type (`reference.system.family_configs`) is built from.

Why a module of its own: the rules for reading a ``preprocessor_config.json`` (or InternVL's ``config.json``) are
transformers' and the model card's, one function per config type; the types themselves only validate values.
Every refusal is `ConfigError` in one line naming the config, the key and what is accepted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from deferlab.reference.system.errors import ConfigError
from deferlab.reference.system.family_configs_published import (
    BICUBIC,
    CLASS_DEFAULTS,
    INTERNVL_ARCHITECTURES,
    PADDLEOCR_CLASSES,
    QWEN_CLASSES,
    REMOTE_DEFAULTS,
    RESCALE,
)
from deferlab.reference.system.validate import check_mapping, check_positive_int, check_str

NORM_KEYS = ("image_mean", "image_std", "rescale_factor", "do_rescale", "do_normalize")
# A RADIO checkpoint's config.json names its statistics norm_mean / norm_std (Nano Nemotron VL, semantics §18.9).
ALIASES = {"image_mean": "norm_mean", "image_std": "norm_std"}
_CONFIG_JSON_KEYS = (
    "force_image_size",
    "min_dynamic_patch",
    "max_dynamic_patch",
    "use_thumbnail",
    "dynamic_image_size",
)


def base_class(name: str) -> str:
    """A processor class name without transformers' backend suffix (``Fast``, ``Pil``)."""
    for suffix in ("Fast", "Pil"):
        if name.endswith(suffix) and name != suffix:
            return name[: -len(suffix)]
    return name


def image_processor(cfg: Mapping[str, Any]) -> Mapping[str, Any]:
    """The image processor's own table: a ``processor_config.json`` nests it under ``image_processor``."""
    check_mapping("preprocessor config", cfg)
    inner = cfg.get("image_processor")
    return inner if isinstance(inner, Mapping) else cfg


def processor_class(cfg: Mapping[str, Any]) -> str:
    """The class a config names: ``image_processor_type``, else ``processor_class``, else the first of
    InternVL's ``architectures``; `ConfigError` in one line when it names none."""
    table = image_processor(cfg)
    for key in ("image_processor_type", "processor_class"):
        for where in (table, cfg):
            if where.get(key) is not None:
                return check_str(key, where[key])
    arch = cfg.get("architectures")
    if isinstance(arch, list) and arch:
        return check_str("architectures[0]", arch[0])
    raise ConfigError(
        "preprocessor config names no class: it has none of image_processor_type, processor_class, "
        f"architectures (a non-empty list); its keys: {sorted(cfg)}"
    )


def class_defaults(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The defaults of the class ``cfg`` names ({} for a class not in `CLASS_DEFAULTS`, or none named)."""
    try:
        name = processor_class(cfg)
    except ConfigError:
        return {}
    return CLASS_DEFAULTS.get(base_class(name), REMOTE_DEFAULTS.get(name, {}))


def values(cfg: Mapping[str, Any], keys: tuple[str, ...], name: str) -> dict[str, Any]:
    """``keys`` of ``cfg``'s image-processor table, class defaults for the missing or null ones."""
    table, defaults = image_processor(cfg), class_defaults(cfg)
    out: dict[str, Any] = {}
    for key in keys:
        value = table.get(key)
        if value is None and key in ALIASES:
            value = table.get(ALIASES[key])
        if value is None:
            if key not in defaults:
                cls_name = table.get("image_processor_type") or cfg.get("processor_class") or "no class"
                raise ConfigError(
                    f"preprocessor config {name!r} has no {key!r} and names {cls_name!r}, whose default deferlab "
                    f"does not know; accepted: the key, or a class of {sorted(CLASS_DEFAULTS)}"
                )
            value = defaults[key]
        out[key] = value
    return out


def qwen_values(cfg: Mapping[str, Any], name: str) -> dict[str, Any]:
    return smart_resize_values(cfg, name, QWEN_CLASSES, "a Qwen2-VL image processor")


def paddleocr_values(cfg: Mapping[str, Any], name: str) -> dict[str, Any]:
    """PaddleOCR-VL's config, read as Qwen2-VL's is (the same keys, its class's defaults; semantics §18.9)."""
    return smart_resize_values(cfg, name, PADDLEOCR_CLASSES, "PaddleOCR-VL's image processor")


def smart_resize_values(cfg: Mapping[str, Any], name: str, classes: tuple[str, ...], what: str) -> dict[str, Any]:
    """The keys of a processor whose resize is a ``smart_resize`` between ``size``'s two pixel bounds (Qwen2-VL's
    and the classes that copy its reading), the first of ``classes``' defaults for what the config leaves out."""
    table = image_processor(cfg)
    kind = table.get("image_processor_type")
    if kind is not None and base_class(str(kind)) not in classes:
        raise ConfigError(
            f"preprocessor config {name!r} names {kind!r}; accepted: {what} ({', '.join(classes)}, with or without "
            "Fast/Pil)"
        )
    if table.get("do_resize") is not None and table["do_resize"] is not True:
        raise ConfigError(f"preprocessor config {name!r}: do_resize must be true, got {table['do_resize']!r}")
    defaults = CLASS_DEFAULTS[classes[0]]
    keys = ("patch_size", "temporal_patch_size", "merge_size", *NORM_KEYS, "do_convert_rgb", "resample")
    out = {k: defaults[k] if table.get(k) is None else table[k] for k in keys}
    size = table.get("size")
    bounds = {"min_pixels": defaults["min_pixels"], "max_pixels": defaults["max_pixels"]}
    if size is not None:
        check_mapping("size", size)
        for key, edge in (("min_pixels", "shortest_edge"), ("max_pixels", "longest_edge")):
            bounds[key] = size.get(edge)
    for key in bounds:  # the legacy keys win over size, as Qwen2VLImageProcessor.__init__ applies them
        if table.get(key) is not None:
            bounds[key] = table[key]
    for key, edge in (("min_pixels", "shortest_edge"), ("max_pixels", "longest_edge")):
        if bounds[key] is None:
            raise ConfigError(
                f"preprocessor config {name!r}: size has no {edge!r} (and no {key!r}): {size!r}; accepted: size with "
                "both shortest_edge and longest_edge, or the min_pixels / max_pixels keys"
            )
        bounds[key] = check_positive_int(f"{key} (size.{edge})", bounds[key])
    return {**out, **bounds}


def internvl_values(cfg: Mapping[str, Any], name: str) -> dict[str, Any]:
    check_mapping("config", cfg)
    table = image_processor(cfg)
    if base_class(str(table.get("image_processor_type", ""))) == "GotOcr2ImageProcessor":
        return got_ocr2_values(table, name)
    architectures = cfg.get("architectures") if isinstance(cfg.get("architectures"), list) else []
    if not any(k in cfg for k in _CONFIG_JSON_KEYS) and not set(architectures) & set(INTERNVL_ARCHITECTURES):
        raise ConfigError(
            f"config {name!r} is neither InternVL's config.json (keys {list(_CONFIG_JSON_KEYS)} or architectures "
            f"{list(INTERNVL_ARCHITECTURES)}) nor a GotOcr2ImageProcessor preprocessor config; its keys: {sorted(cfg)}"
        )
    vision = cfg.get("vision_config") if isinstance(cfg.get("vision_config"), Mapping) else {}
    size = cfg.get("force_image_size") if cfg.get("force_image_size") is not None else vision.get("image_size", 448)
    given = {
        "min_num": cfg.get("min_dynamic_patch"),
        "max_num": cfg.get("max_dynamic_patch"),
        "use_thumbnail": cfg.get("use_thumbnail"),
        "dynamic_image_size": cfg.get("dynamic_image_size"),
    }
    return {"image_size": size, **{k: v for k, v in given.items() if v is not None}}


def got_ocr2_values(table: Mapping[str, Any], name: str) -> dict[str, Any]:
    got = {
        k: CLASS_DEFAULTS["GotOcr2ImageProcessor"][k] if table.get(k) is None else table[k]
        for k in ("resample", "min_patches", "max_patches", *NORM_KEYS)
    }
    size = table.get("size")
    if not isinstance(size, Mapping) or size.get("height") is None or size.get("height") != size.get("width"):
        raise ConfigError(
            f"preprocessor config {name!r}: size must be a square {{'height': n, 'width': n}}, got {size!r}"
        )
    for key, wanted in (
        ("resample", BICUBIC),
        ("do_rescale", True),
        ("do_normalize", True),
        ("rescale_factor", RESCALE),
    ):
        if got[key] != wanted or isinstance(got[key], bool) != isinstance(wanted, bool):
            raise ConfigError(
                f"preprocessor config {name!r}: {key} is {got[key]!r}; accepted: {wanted!r} (the model card's "
                "load_image resizes BICUBIC and runs ToTensor and Normalize)"
            )
    return {
        "image_size": size["height"],
        "min_num": got["min_patches"],
        "max_num": got["max_patches"],
        "image_mean": got["image_mean"],
        "image_std": got["image_std"],
    }
