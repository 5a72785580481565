"""`reference.system.families.of_config`: the family a checkpoint's preprocessor_config.json names."""

from __future__ import annotations

import pytest

from deferlab.reference.system.errors import DeferlabInputError
from deferlab.reference.system.families import FAMILIES, of_config


@pytest.mark.parametrize(
    ("config", "family"),
    [
        ({"media_proc_cfg": {"patch_size": 14}}, "kimi-k3"),
        ({"in_patch_limit": 16384, "patch_size": 14}, "kimi-k3"),
        ({"image_processor_type": "Qwen2VLImageProcessor", "patch_size": 14}, "qwen2.5-vl"),
        ({"image_processor_type": "Qwen2VLImageProcessorFast", "patch_size": 16}, "qwen3-vl"),
        ({"image_processor_type": "GotOcr2ImageProcessor"}, "internvl"),
        ({"processor_class": "Gemma3ImageProcessor"}, "gemma3"),
    ],
)
def test_the_processor_class_names_the_family(config: dict, family: str) -> None:
    assert of_config(config).name == family


def test_every_class_of_the_registry_names_its_family_alone_or_by_patch_size() -> None:
    for f in FAMILIES.values():
        for cls in f.processor_classes:
            patch = {"qwen2.5-vl": 14, "qwen3-vl": 16}.get(f.name)
            if f.name == "kimi-k3":
                continue  # a Kimi config is told by its media_proc_cfg
            assert of_config({"image_processor_type": cls, "patch_size": patch}).name == f.name, (f.name, cls)


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"image_processor_type": "CLIPImageProcessor"},
        {"image_processor_type": "Qwen2VLImageProcessor", "patch_size": 32},
    ],
)
def test_no_family_is_one_line_naming_the_accepted_classes(config: dict) -> None:
    with pytest.raises(DeferlabInputError, match="is no checked family's.*; accepted: ") as info:
        of_config(config)
    assert "\n" not in str(info.value)
