"""A reproducer's ``media_proc_cfg`` carries the keys each engine's processor reads beside the config's own.

Why: `reports.repro.served` asks vLLM's plugin hooks for its driver's video defaults instead of importing the
driver (issue 29, item 4); the stated dict must stay what vLLM's driver builds its processor from
(`impl.vllm.driver.VIDEO_DEFAULTS` under the config's keys), and an engine with no such keys adds none.
"""

from __future__ import annotations

from deferlab.impl.vllm.driver import VIDEO_DEFAULTS
from deferlab.reference.system.profiles import profile
from deferlab.reports.repro import served

K3 = profile("kimi-k3")


def test_vllm_states_its_drivers_video_defaults_under_the_configs_keys() -> None:
    stated = served.media_proc_cfg(K3, "vllm")
    assert stated == {**VIDEO_DEFAULTS, **K3.to_media_proc_cfg()}
    assert set(VIDEO_DEFAULTS) <= set(stated) and VIDEO_DEFAULTS  # the video keys are there, not only the config's


def test_sglang_states_the_config_alone() -> None:
    assert served.media_proc_cfg(K3, "sglang") == K3.to_media_proc_cfg()
