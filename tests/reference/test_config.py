"""PreprocessConfig validation, round trips and profiles."""

from __future__ import annotations

import json

import numpy as np
import pytest

from deferlab.reference.system.config import BackgroundConfig, PreprocessConfig, ResizeConfig
from deferlab.reference.system.errors import InputValueError
from deferlab.reference.system.profiles import profile, profile_names, profile_source


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


def test_missing_pattern_means_black_and_type_key_is_ignored():
    assert BackgroundConfig.from_dict({"type": "white"}).pattern == "black"


def test_resize_config_grid_and_dict():
    rc = ResizeConfig(640, 480, 4, 24, 414, patch_size=14)
    assert rc.grid_thw == (1, 36, 46) and rc.num_patches == 36 * 46
    assert ResizeConfig.from_dict(rc.to_dict(), patch_size=14) == rc


def test_numpy_integers_are_ints():
    """np.int64(14) is a patch size like 14 (one integer rule for every front door), stored as a Python int."""
    cfg = PreprocessConfig(patch_size=np.int64(14), in_patch_limit=np.int32(4096))
    assert cfg == PreprocessConfig(patch_size=14, in_patch_limit=4096) and type(cfg.patch_size) is int


def test_lenient_and_checkpoint_extras():
    """strict=False ignores a misspelt key (strict refusal: test_front_door); real checkpoint extras are accepted."""
    cfg = profile("kimi-k3").to_media_proc_cfg()
    assert PreprocessConfig.from_media_proc_cfg({**cfg, "in_patch_limt": 5}, strict=False) == profile("kimi-k3")
    extras = {"transparent_bg_fill_stage": "after_resize", "in_patch_limit_each_frame": 4096, "sample_fps": 2.0}
    assert PreprocessConfig.from_media_proc_cfg({**cfg, **extras}) == profile("kimi-k3")


def test_fill_stage_is_a_real_key():
    """transparent_bg_fill_stage is read into fill_stage, validated, written back; K3's profiles say after_resize."""
    assert profile("kimi-k3").fill_stage == "after_resize" == profile("clip-stats").fill_stage
    assert profile("kimi-k2.5").fill_stage is None and profile("sglang-gate-test").fill_stage is None
    cfg = profile("kimi-k3").to_media_proc_cfg()
    assert cfg["transparent_bg_fill_stage"] == "after_resize"
    before = PreprocessConfig.from_media_proc_cfg({**cfg, "transparent_bg_fill_stage": "before_resize"})
    assert before.fill_stage == "before_resize" and before != profile("kimi-k3")
    assert PreprocessConfig.from_media_proc_cfg(before.to_media_proc_cfg()) == before
    unstated = {k: v for k, v in cfg.items() if k != "transparent_bg_fill_stage"}
    assert PreprocessConfig.from_media_proc_cfg(unstated).fill_stage is None
    for bad in ("after", "AFTER_RESIZE", 1):
        with pytest.raises(InputValueError, match=r"fill_stage \(transparent_bg_fill_stage\) must be one of "):
            PreprocessConfig(fill_stage=bad)
        with pytest.raises(InputValueError, match=rf"'after_resize', 'before_resize'; got {bad!r}"):
            PreprocessConfig.from_media_proc_cfg({**cfg, "transparent_bg_fill_stage": bad})
