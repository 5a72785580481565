"""``--checkpoint DIR`` reaches the served-vs-trained claims: their config is the snapshot's own file."""

from __future__ import annotations

import json

from deferlab.properties import served
from deferlab.reference.system.profiles import profile_media_proc_cfg
from deferlab.reference.system.served import CHECKPOINT_ENV


def test_the_served_claims_run_under_a_snapshots_config(tmp_path, monkeypatch):
    cfg = {**profile_media_proc_cfg("kimi-k3"), "in_patch_limit": 1024, "transparent_bg_fill_stage": "before_resize"}
    cfg.pop("max_pixels", None)
    (tmp_path / "preprocessor_config.json").write_text(json.dumps({"media_proc_cfg": cfg, "processor_class": "X"}))
    served.checkpoint_snapshot.cache_clear()
    try:
        assert served.session_config().in_patch_limit == 65536  # no snapshot named: the kimi-k3 profile
        served.checkpoint_snapshot.cache_clear()
        monkeypatch.setenv(CHECKPOINT_ENV, str(tmp_path))
        got = served.session_config()
        assert (got.in_patch_limit, got.fill_stage) == (1024, "before_resize")
        assert served.checkpoint_snapshot()[1]["in_patch_limit"] == 1024  # the raw dict vLLM is built from
    finally:
        served.checkpoint_snapshot.cache_clear()


def test_pytest_offers_the_option(pytestconfig):
    assert pytestconfig.getoption("--checkpoint", default="absent") != "absent"


def test_the_plugin_names_the_same_variable():
    from deferlab.properties import plugin

    assert plugin.CHECKPOINT_ENV == CHECKPOINT_ENV
