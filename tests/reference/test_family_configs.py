"""The families' config types and published profiles (`reference.system.family_configs`, semantics §18.4).

Each reader is checked on the published dicts, on what transformers' rules give a config that leaves a key
out, and on bad values (one line naming the key, the value and what is accepted); then against transformers
itself, which is handed the same dicts."""

from __future__ import annotations

import pytest

from deferlab.reference.system.errors import ConfigError, InputTypeError, InputValueError
from deferlab.reference.system.families import FAMILIES
from deferlab.reference.system.family_configs import (
    CLASS_DEFAULTS,
    CLIP_MEAN,
    CLIP_STD,
    HALF,
    IMAGENET_MEAN,
    IMAGENET_STD,
    PROFILES,
    PUBLISHED,
    InternVLConfig,
    NormConfig,
    QwenVLConfig,
    family_profile,
    norm_of,
    processor_class,
    published_config,
)

QWEN = QwenVLConfig.from_preprocessor_config


NEMOTRON = ("nemotron-vl", "nemotron-parse", "nano-nemotron-vl")
# read from code or class defaults, no checkpoint file (semantics §18.9)
NO_FILE = (*NEMOTRON, "minicpm-v-4.6", "ernie-4.5-vl", "mimo-v2.5", "step3-vl")


def test_profiles_are_the_registry_families_beyond_kimi() -> None:
    assert set(PROFILES) == {f.profile for f in FAMILIES.values() if f.name != "kimi-k3"}
    for name, (cfg, source) in PROFILES.items():
        assert family_profile(name) is cfg and source
        # InternVL's is the official repo's; the Nemotron families' are read from code or fixtures (semantics §18.9)
        assert ("third-party copy" in source) == (name not in ("internvl", *NO_FILE)), name
        assert name not in NO_FILE or "unverified" in source, name


def test_nemotron_profiles_by_hand() -> None:
    """Nemotron VL's SigLIP constants; Parse's processor config; Nano's config.json norm_mean / norm_std read as
    the statistics, with its remote code's rescale (semantics §18.9)."""
    assert family_profile("nemotron-vl") == NormConfig(HALF, HALF)
    assert family_profile("nemotron-parse") == NormConfig(CLIP_MEAN, CLIP_STD)
    assert family_profile("nano-nemotron-vl") == NormConfig(CLIP_MEAN, CLIP_STD)
    nano = {"architectures": ["NemotronH_Nano_VL_V2"], "norm_mean": [0.25] * 3, "norm_std": [0.5] * 3}
    assert NormConfig.from_preprocessor_config(nano) == NormConfig((0.25,) * 3, (0.5,) * 3)
    with pytest.raises(ConfigError, match="has no 'image_mean'"):
        NormConfig.from_preprocessor_config({"architectures": ["NemotronH_Nano_VL_V2"], "norm_std": [0.5] * 3})


def test_published_values_by_hand() -> None:
    q25, q3 = family_profile("qwen2.5-vl"), family_profile("qwen3-vl")
    assert (q25.factor, q25.min_pixels, q25.max_pixels, q25.image_mean) == (28, 3136, 16384 * 28 * 28, CLIP_MEAN)
    assert (q3.factor, q3.min_pixels, q3.max_pixels, q3.image_std) == (32, 65536, 16777216, HALF)
    assert q25.resample == q3.resample == 3 and q3.rescale_factor == 0.00392156862745098
    assert family_profile("internvl") == InternVLConfig(448, 1, 12, True, True, IMAGENET_MEAN, IMAGENET_STD)
    assert family_profile("gemma4") == NormConfig((0.0,) * 3, (1.0,) * 3, do_normalize=False)
    assert norm_of(family_profile("gemma3")) == NormConfig(HALF, HALF)
    assert norm_of(family_profile("internvl")).image_std == IMAGENET_STD


def test_unknown_profile_and_published_copies() -> None:
    with pytest.raises(InputValueError, match=r"unknown family profile 'kimi-k3'; accepted: qwen2.5-vl, qwen3-vl"):
        family_profile("kimi-k3")
    copy = published_config("qwen3-vl")
    copy["size"]["shortest_edge"] = 1
    assert PUBLISHED["qwen3-vl"]["size"]["shortest_edge"] == 65536


@pytest.mark.parametrize(
    ("cfg", "expected"),
    [
        (PUBLISHED["qwen2.5-vl"], "Qwen2VLImageProcessor"),
        (PUBLISHED["qwen3-vl"], "Qwen2VLImageProcessorFast"),
        ({"processor_class": "Gemma4Processor"}, "Gemma4Processor"),
        ({"image_processor": {"image_processor_type": "Gemma4ImageProcessor"}}, "Gemma4ImageProcessor"),
        (PUBLISHED["internvl"], "InternVLChatModel"),
    ],
)
def test_processor_class(cfg: dict, expected: str) -> None:
    assert processor_class(cfg) == expected


def test_processor_class_refuses_a_config_naming_none() -> None:
    with pytest.raises(ConfigError, match=r"names no class.*its keys: \['size'\]"):
        processor_class({"size": {}})


def test_qwen_reader_size_legacy_keys_and_defaults() -> None:
    assert QWEN({}) == QwenVLConfig()  # the class defaults: 56*56 .. 28*28*1280, CLIP
    q = QWEN({"size": {"shortest_edge": 100, "longest_edge": 1000}, "min_pixels": 200, "patch_size": None})
    assert (q.min_pixels, q.max_pixels, q.patch_size) == (200, 1000, 14)  # min_pixels wins; null = default
    nested = QWEN({"image_processor": PUBLISHED["qwen3-vl"], "processor_class": "Qwen3VLProcessor"})
    assert nested == family_profile("qwen3-vl")


@pytest.mark.parametrize(
    ("cfg", "message"),
    [
        ({"patch_size": 0}, r"patch_size must be an int >= 1, got 0"),
        ({"merge_size": 2.0}, r"merge_size must be an int >= 1, got 2\.0"),
        ({"size": {"longest_edge": 5000}}, r"size has no 'shortest_edge' \(and no 'min_pixels'\)"),
        ({"min_pixels": 5000, "max_pixels": 4000}, r"min_pixels \(size.shortest_edge\) must be <= max_pixels"),
        ({"image_mean": [0.5, 0.5]}, r"same length .* got 2 and 3"),
        ({"image_mean": [0.5] * 4, "image_std": [0.5] * 4}, r"image_mean must have 3 values"),
        ({"image_std": [0.5, 0.0, 0.5]}, r"image_std\[1\] must be a number > 0, got 0\.0"),
        ({"rescale_factor": "1/255"}, r"rescale_factor must be a number"),
        ({"do_normalize": 1}, r"do_normalize must be a bool"),
        ({"resample": 7}, r"resample must be an int in 0\.\.5, got 7"),
        ({"do_resize": False}, r"do_resize must be true, got False"),
        ({"image_processor_type": "Glm4vImageProcessor"}, r"names 'Glm4vImageProcessor'; accepted: a Qwen2-VL"),
    ],
)
def test_qwen_reader_refuses_bad_values_in_one_line(cfg: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=r"^preprocessor config 'x'[ :].*" + message) as info:
        QWEN(cfg, name="x")
    assert "\n" not in str(info.value)


def test_direct_construction_validates_too() -> None:
    with pytest.raises(InputValueError, match="temporal_patch_size must be an int >= 1"):
        QwenVLConfig(temporal_patch_size=0)
    with pytest.raises(InputTypeError, match="image_mean must be a non-empty list"):
        NormConfig("0.5", HALF)
    with pytest.raises(InputValueError, match=r"min_num \(min_dynamic_patch\) must be <= max_num"):
        InternVLConfig(min_num=3, max_num=2)


def test_norm_reader_takes_the_named_class_defaults() -> None:
    assert NormConfig.from_preprocessor_config({"image_processor_type": "Gemma4ImageProcessor"}) == NormConfig(
        (0.0,) * 3, (1.0,) * 3, do_normalize=False
    )
    stated = {"image_mean": 0.5, "image_std": 0.5, "rescale_factor": 0.5, "do_rescale": True, "do_normalize": True}
    scalar = NormConfig.from_preprocessor_config({"processor_class": "X", **stated})  # every key stated: no default
    assert scalar.image_mean == HALF and scalar.channels == 3
    with pytest.raises(ConfigError, match=r"has no 'image_mean' and names 'Foo', whose default deferlab does not know"):
        NormConfig.from_preprocessor_config({"image_processor_type": "Foo"}, name="x")
    with pytest.raises(ConfigError, match=r"rescale_factor must be a number > 0, got 0"):
        NormConfig.from_preprocessor_config({"image_processor_type": "Gemma3ImageProcessor", "rescale_factor": 0})


def test_internvl_reader_config_json_and_got_ocr2() -> None:
    read = InternVLConfig.from_preprocessor_config
    assert read({"architectures": ["InternVLChatModel"], "vision_config": {"image_size": 224}}).image_size == 224
    off = read({"force_image_size": 448, "dynamic_image_size": False, "max_dynamic_patch": 6, "use_thumbnail": False})
    assert off.bounds == (1, 1) and off.max_num == 6 and not off.use_thumbnail
    hf = read(
        {
            "image_processor_type": "GotOcr2ImageProcessorFast",
            "size": {"height": 448, "width": 448},
            "max_patches": 6,
            "image_mean": list(IMAGENET_MEAN),
            "image_std": list(IMAGENET_STD),
        }
    )
    assert hf == InternVLConfig(max_num=6)
    assert (
        read({"image_processor_type": "GotOcr2ImageProcessor", "size": {"height": 28, "width": 28}}).image_mean
        == CLIP_MEAN
    )


@pytest.mark.parametrize(
    ("cfg", "message"),
    [
        ({"force_image_size": 0}, r"image_size \(force_image_size\) must be an int >= 1, got 0"),
        ({"min_dynamic_patch": 0}, r"min_num \(min_dynamic_patch\) must be an int >= 1, got 0"),
        ({"use_thumbnail": "yes"}, r"use_thumbnail must be a bool"),
        ({"size": 448}, r"is neither InternVL's config.json"),
        (
            {"image_processor_type": "GotOcr2ImageProcessor", "size": {"height": 448, "width": 224}},
            r"size must be a square",
        ),
        (
            {"image_processor_type": "GotOcr2ImageProcessor", "size": {"height": 4, "width": 4}, "resample": 2},
            r"resample is 2; accepted: 3",
        ),
        (
            {"image_processor_type": "GotOcr2ImageProcessor", "size": {"height": 4, "width": 4}, "do_rescale": 1},
            r"do_rescale is 1; accepted: True",
        ),
    ],
)
def test_internvl_reader_refuses_bad_values(cfg: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        InternVLConfig.from_preprocessor_config(cfg, name="x")


@pytest.mark.extra("transformers")
@pytest.mark.parametrize("name", ["qwen2.5-vl", "qwen3-vl"])
def test_qwen_readers_agree_with_transformers(name: str) -> None:
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    for cfg in (published_config(name), {**published_config(name), "min_pixels": 1000}, {}):
        ours, theirs = QWEN(cfg), Qwen2VLImageProcessorPil.from_dict(cfg)
        assert (ours.min_pixels, ours.max_pixels) == (theirs.size.shortest_edge, theirs.size.longest_edge)
        for key in (
            "patch_size",
            "temporal_patch_size",
            "merge_size",
            "rescale_factor",
            "do_rescale",
            "do_normalize",
            "do_convert_rgb",
            "resample",
        ):
            assert getattr(ours, key) == getattr(theirs, key), key
        assert ours.image_mean == tuple(theirs.image_mean) and ours.image_std == tuple(theirs.image_std)


@pytest.mark.extra("transformers")
def test_class_defaults_are_transformers_class_attributes() -> None:
    from tests.reference.test_family_norm import pil_processor

    for name, defaults in CLASS_DEFAULTS.items():
        processor = pil_processor(name, {})
        for key, value in defaults.items():
            theirs = getattr(processor, key, None)
            if key in ("min_pixels", "max_pixels"):
                theirs = processor.size.shortest_edge if key == "min_pixels" else processor.size.longest_edge
            if key in ("image_mean", "image_std"):
                theirs = tuple(theirs)
            assert theirs == value, (name, key)
