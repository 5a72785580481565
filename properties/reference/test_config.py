"""PreprocessConfig validation, round trips and profiles."""

from __future__ import annotations

import json
import math

import pytest

from reference.config import BackgroundConfig, PreprocessConfig, ResizeConfig
from reference.profiles import profile, profile_names, profile_source


def test_default_profile_is_kimi_k3():
    cfg = profile()
    assert cfg.name == "kimi-k3" and cfg.in_patch_limit == 65536 and cfg.patch_limit_on_one_side == 512
    assert cfg.background == BackgroundConfig("chessboard", 8, 255, 180, True)


@pytest.mark.parametrize("name", profile_names())
def test_every_profile_round_trips(name):
    cfg = profile(name)
    assert PreprocessConfig.from_media_proc_cfg(cfg.to_media_proc_cfg()) == cfg
    assert profile_source(name)


def test_from_json_reads_nested_and_flat(tmp_path):
    cfg = profile("kimi-k3")
    flat = tmp_path / "flat.json"
    flat.write_text(json.dumps(cfg.to_media_proc_cfg()))
    nested = tmp_path / "preprocessor_config.json"
    nested.write_text(json.dumps({"processor_class": "X", "media_proc_cfg": cfg.to_media_proc_cfg()}))
    assert PreprocessConfig.from_json(flat) == cfg == PreprocessConfig.from_json(nested)


def test_from_json_bad_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        PreprocessConfig.from_json(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        PreprocessConfig.from_json(bad)


BAD = [
    ({"patch_size": 0}, ValueError, "patch_size"),
    ({"patch_size": 14.0}, TypeError, "patch_size"),
    ({"merge_kernel_size": -1}, ValueError, "merge_kernel_size"),
    ({"in_patch_limit": True}, TypeError, "in_patch_limit"),
    ({"fixed_output_tokens": 0}, ValueError, "fixed_output_tokens"),
    ({"image_mean": (0.5, 0.5)}, ValueError, "image_mean"),
    ({"image_mean": (0.5, math.nan, 0.5)}, ValueError, r"image_mean\[1\]"),
    ({"image_std": (0.5, 0.0, 0.5)}, ValueError, r"image_std\[1\]"),
    ({"image_std": (0.5, math.inf, 0.5)}, ValueError, r"image_std\[1\]"),
    ({"image_std": "abc"}, TypeError, "image_std"),
    ({"background": {"pattern": "plaid"}}, ValueError, "pattern"),
    ({"background": {"pattern": "chessboard", "chessboard_gray_value": 300}}, ValueError, "gray_value"),
    ({"background": {"pattern": "chessboard", "chessboard_square_size": 0}}, ValueError, "square_size"),
    ({"background": 3}, TypeError, "background"),
    ({"max_pixels": 0}, ValueError, "max_pixels"),
]


@pytest.mark.parametrize(("kwargs", "exc", "match"), BAD, ids=[str(k) for k, _, _ in BAD])
def test_bad_configs_name_the_field(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        PreprocessConfig(**kwargs)


def test_missing_pattern_means_black_and_type_key_is_ignored():
    assert BackgroundConfig.from_dict({"type": "white"}).pattern == "black"


def test_unknown_profile_lists_known():
    with pytest.raises(ValueError, match="kimi-k3"):
        profile("kimi-k9")


def test_resize_config_grid_and_dict():
    rc = ResizeConfig(640, 480, 4, 24, 414)
    assert rc.grid_thw == (1, 36, 46) and rc.num_patches == 36 * 46
    assert ResizeConfig.from_dict(rc.to_dict()) == rc


def test_missing_required_keys_are_named(tmp_path):
    """A file without the geometry keys must not silently become Kimi-K3."""
    cfg = profile("kimi-k3").to_media_proc_cfg()
    del cfg["in_patch_limit"], cfg["image_std"]
    with pytest.raises(ValueError, match=r"missing required keys \['in_patch_limit', 'image_std'\]"):
        PreprocessConfig.from_media_proc_cfg(cfg)
    wrong_shape = tmp_path / "preprocessor_config.json"
    wrong_shape.write_text(json.dumps({"image_processor": {"patch_size": 16, "in_patch_limit": 1024}}))
    with pytest.raises(ValueError, match="neither a 'media_proc_cfg' object nor its keys"):
        PreprocessConfig.from_json(wrong_shape)


def test_unknown_keys_are_refused_unless_lenient():
    """A misspelt key is an error naming it; strict=False ignores it; real checkpoint extras are accepted."""
    cfg = profile("kimi-k3").to_media_proc_cfg()
    with pytest.raises(ValueError, match=r"unknown keys \['in_patch_limt'\]"):
        PreprocessConfig.from_media_proc_cfg({**cfg, "in_patch_limt": 5})
    assert PreprocessConfig.from_media_proc_cfg({**cfg, "in_patch_limt": 5}, strict=False) == profile("kimi-k3")
    extras = {"transparent_bg_fill_stage": "after_resize", "in_patch_limit_each_frame": 4096, "sample_fps": 2.0}
    assert PreprocessConfig.from_media_proc_cfg({**cfg, **extras}) == profile("kimi-k3")
