"""GLM-4.1V on LMDeploy has no video path (semantics §20.7, issue 31): the n/a and the release's code behind it.

Why run LMDeploy's code for an n/a: the reason `video_paths` gives is a reading of the wheel (the GLM class registers
no video token, so the shared ``VisionModel.preprocess`` cannot place a video's features), and a reading can be
wrong. So the release's own ``GLM4_1_VisionModel.build_preprocessor`` runs on a stand-in checkpoint processor that
*offers* a video token, and its own ``VisionModel.preprocess`` runs on a video item with the tokens it registered:
it must fail where the reading says, and succeed once a video token id is given (what Qwen3-VL's class registers),
so the check can tell the two apart.
"""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from deferlab.impl.lmdeploy.video import video_paths
from deferlab.reference.system.video import Unsupported

GLM = "lmdeploy.vl.model.glm4_1v"
BASE = "lmdeploy.vl.model.base"
IMAGE_ID, VIDEO_ID = 151343, 151344  # GLM-4.1V's <|image|> and <|video|> ids (the checkpoint's tokenizer)


def _source() -> Any:
    """The release under test, loaded in this test's process: these tests run in a process of their own when a
    transformers is imported here already (``own_process``), since an earlier engine's torchvision companion would
    keep LMDeploy's out (one copy per process)."""
    from deferlab.impl.lmdeploy import sources
    from deferlab.properties.engines import load_or_skip

    spec = os.environ.get("DEFERLAB_LMDEPLOY", sources.DEFAULT_VERSION)
    return load_or_skip(lambda s: sources.load(s, companions=sources.COMPANIONS), spec, "lmdeploy")


@pytest.mark.own_process
def test_glm_has_no_lmdeploy_video_path():
    lmdeploy_source = _source()
    with pytest.raises(Unsupported, match=r"^n/a: .*GLM4_1_VisionModel registers no video token.*0\.14\.0-0\.18\.0"):
        video_paths(lmdeploy_source, "glm-4.1v")


def _stub_processor() -> SimpleNamespace:
    """The attributes ``build_preprocessor`` reads off a checkpoint's ``AutoProcessor``; a video token is offered."""
    return SimpleNamespace(image_token="<|image|>", image_token_id=IMAGE_ID, video_token="<|video|>",
                           video_token_id=VIDEO_ID)  # fmt: skip


def _glm_tokens(source: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``GLM4_1_VisionModel.build_preprocessor`` of the release, run on a stand-in self with the checkpoint's
    ``AutoProcessor.from_pretrained`` answered by `_stub_processor` (no snapshot here): the tokens it registers."""
    import transformers

    monkeypatch.setattr(transformers.AutoProcessor, "from_pretrained", staticmethod(lambda *a, **k: _stub_processor()))
    model = SimpleNamespace(model_path="zai-org/GLM-4.1V-9B-Thinking")
    source.module(GLM).GLM4_1_VisionModel.build_preprocessor(model)
    return model.mm_tokens


class _VideoOutputs:
    """Stand-in for the checkpoint's processor inside ``preprocess``: what GLM's processor returns for one video of
    two frames at 56x56 (``video_grid_thw`` (1, 4, 4), its frames written as image tokens)."""

    image_processor = video_processor = SimpleNamespace(size={"shortest_edge": 12544, "longest_edge": 47040000})

    def __call__(self, **kwargs: Any) -> dict[str, Any]:
        import torch

        assert kwargs["videos_kwargs"]["do_sample_frames"] is False
        ids = [1, 2] + [IMAGE_ID] * 4 + [3]
        return {"input_ids": torch.tensor([ids]), "pixel_values_videos": torch.zeros(16, 1176),
                "video_grid_thw": torch.tensor([[1, 4, 4]])}  # fmt: skip


def _preprocess(source: Any, mm_tokens: Any) -> dict[str, Any]:
    """``GLM4_1_VisionModel.preprocess`` (``VisionModel``'s, inherited) of the release on one video item: an instance
    made without ``__init__`` (which reads a snapshot's config), given the processor and the tokens."""
    cls = source.module(GLM).GLM4_1_VisionModel
    model = object.__new__(cls)
    model.processor, model.mm_tokens, model.mm_feature_dtype = _VideoOutputs(), mm_tokens, None
    assert type(model).preprocess is source.module(BASE).VisionModel.preprocess
    item = {"type": "video", "data": np.zeros((2, 48, 64, 3), np.uint8), "video_metadata": {"fps": 1.0}}
    return model.preprocess([{"role": "user", "content": [item]}], "<|video|>", None)


@pytest.mark.extra("transformers")
@pytest.mark.own_process
def test_glm_class_registers_no_video_token(monkeypatch):
    lmdeploy_source = _source()
    tokens = _glm_tokens(lmdeploy_source, monkeypatch)
    assert (tokens.image_token_id, tokens.video_token_id, tokens.video_token) == (IMAGE_ID, None, None)


@pytest.mark.extra("transformers")
@pytest.mark.own_process
def test_a_video_item_fails_in_preprocess_for_want_of_that_token(monkeypatch):
    lmdeploy_source = _source()
    tokens = _glm_tokens(lmdeploy_source, monkeypatch)
    with pytest.raises(TypeError, match="not subscriptable"):  # get_mm_items_offset(input_ids, None)
        _preprocess(lmdeploy_source, tokens)
    # The same call with a video token id (the image one GLM's frames use) places the video: the check can fail.
    placed = _preprocess(lmdeploy_source, type(tokens)(image_token_id=IMAGE_ID, video_token_id=IMAGE_ID))
    assert [m["offset"] for m in placed["multimodal"]] == [(2, 6)]
