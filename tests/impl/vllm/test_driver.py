"""vLLM's own Kimi-K3 image path on a CPU: what the driver runs, and the facts semantics §16.1 states of it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from deferlab.reference.system.profiles import profile

pytestmark = pytest.mark.extra("vllm")  # vLLM runs for real: numba and pydantic (the vllm extra)

K3 = profile("kimi-k3")


def rgb(h: int, w: int, seed: int = 0, channels: int = 3) -> Image.Image:
    arr = np.random.default_rng(seed).integers(0, 256, (h, w, channels), dtype=np.uint8)
    return Image.fromarray(arr, "RGBA" if channels == 4 else "RGB")


def test_serve_returns_float32_patches_and_int64_grids(vll):
    pv, grids = vll.serve([rgb(30, 50), rgb(20, 20, 1)], K3)
    assert pv.dtype == np.float32 and grids.dtype == np.int64
    assert grids.tolist() == [[1, 4, 4], [1, 2, 2]]
    assert pv.shape == (16 + 4, 3, 14, 14)


def test_the_parser_composites_transparency_onto_white_before_the_processor(vll):
    """§16.1: convert_image_mode pastes an RGBA image onto white; a fully transparent pixel becomes 255."""
    img = Image.new("RGBA", (4, 4), (10, 20, 30, 0))
    (parsed,) = vll.parse([img])
    assert parsed.mode == "RGB" and parsed.getpixel((0, 0)) == (255, 255, 255)


def test_the_parser_composites_an_rgb_image_with_a_stray_key(vll):
    """§16.1: an RGB image whose info carries a transparency key counts as transparent."""
    img = Image.new("RGB", (3, 3), (5, 6, 7))
    img.info["transparency"] = (5, 6, 7)
    (parsed,) = vll.parse([img])
    assert parsed.getpixel((1, 1)) == (255, 255, 255)


def test_uint8_arrays_are_refused_by_vllms_own_processor(vll):
    with pytest.raises(ValueError, match="Unsupported data type"):
        vll.serve([np.zeros((8, 8, 3), np.uint8)], K3)


@settings(max_examples=25, deadline=None)
@given(w=st.integers(1, 120), h=st.integers(1, 120))
def test_prompt_tokens_are_what_media_tokens_calculator_returns(vll, w, h):
    """The driver reads tokens off get_resize_config with a size-only image; vLLM's own calculator (which
    converts the image first) gives the same number on a real image of that size."""
    real = vll.processor(K3).media_tokens_calculator({"type": "image", "image": Image.new("L", (w, h))})
    assert vll.num_tokens(w, h, K3) == real


def test_geometry_function_is_the_engines_resize_config(vll):
    f = vll.geometry_function(K3)
    rc = f(640, 480)
    assert (rc["new_width"], rc["new_height"], rc["pad_width"], rc["pad_height"]) == vll.geometry(640, 480, K3)
    assert (rc["pad_width"], rc["pad_height"], rc["num_tokens"]) == (4, 24, 414)  # semantics §3.2 worked values


def test_a_checkpoints_own_config_is_used_as_it_is(vll):
    from deferlab.impl.vllm.driver import VLLMPath

    raw = {**K3.to_media_proc_cfg(), "temporal_merge_kernel_size": 4, "in_patch_limit": 1024}
    path = VLLMPath(vll.source, media_proc_cfg=raw)
    assert path.processor(K3).media_proc_cfg["in_patch_limit"] == 1024
    assert path.media_proc_cfg(K3) == raw


class _FakeCheckpoint:
    """What a caller hands a release that serves the checkpoint's remote code (records what it was given)."""

    def __init__(self) -> None:
        self.seen: list = []

    def preprocess(self, images, cfg):
        self.seen = list(images)
        return np.zeros((0, 3, 14, 14), np.float32), np.zeros((0, 3), np.int64)

    def resize_config(self, w, h, cfg):
        from deferlab.reference.oracle.navit import resize_config

        return resize_config(w, h, cfg)

    def num_tokens(self, w, h, cfg):
        return -1


def test_a_release_serving_the_checkpoints_processor_runs_vllms_parser_then_the_handed_pipeline(vll):
    from deferlab.impl.vllm.driver import VLLMPath

    path = VLLMPath(vll.source)
    path._processor_cls = None  # as 0.27.0-0.31.0 load: no override in the processing info
    with pytest.raises(NotImplementedError, match="remote-code image processor"):
        path.serve([rgb(4, 4)], K3)
    fake = _FakeCheckpoint()
    path._checkpoint = fake
    path.serve([rgb(4, 4, channels=4)], K3)
    assert [im.mode for im in fake.seen] == ["RGB"]  # the parser ran first
    assert path.num_tokens(10, 10, K3) == -1
    assert path.provenance()["serve"].startswith("modelled:")
