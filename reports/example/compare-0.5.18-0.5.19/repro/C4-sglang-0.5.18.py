# deferlab reproducer (format 1): claim C4 on sglang-0.5.18
# Claim: C4: Deferred output is BF16 bit-identical to eager output on the same device, for any owner partition.
# System: sglang-0.5.18 (wheel 0.5.18, commit -)
# Spec: 0.5.18
# Flaw: an owner whose images are not 0..k-1 fails its grid check
# Recorded failure: ValueError: Kimi-K3 deferred GPU preprocessing produced wrong grids
# Counterexample: deferlab's minimal counterexample, from deferlab compare 0.5.18 0.5.19 (BASE, profile ci):
#   ["PreprocessConfig(patch_size=1, merge_kernel_size=1, in_patch_limit=1, patch_limit_on_one_side=2,
#   fixed_output_tokens=None, image_mean=(0.5, 0.5, 0.5), image_std=(0.5, 0.5, 0.5), background=None,
#   fill_stage=None, max_pixels=178956970, name='drawn-pixel')", ["PIL.Image(mode='1', size=(1, 1), info={},
#   data=bytes.fromhex('00'))", "PIL.Image(mode='1', size=(1, 4), info={}, data=bytes.fromhex('00000000'))"], [[1,
#   0]]]
# Written by: deferlab 0.1.0 (commit dfdb2a6013b1)
# Run: pytest THIS_FILE where that engine is installed, or deferlab repro THIS_FILE --sglang SPEC (deferlab's
#   loader: no SGLang dependencies needed). It fails while the flaw is there and passes once it is fixed.
"""Reproducer of claim C4: an owner whose images are not 0..k-1 fails its grid check."""

import types

import torch

import sglang.srt.models.kimi_k3 as kimi_k3_model
import sglang.srt.multimodal.mm_utils as mm_utils
from sglang.srt.managers.schedule_batch import Modality, MultimodalDataItem
from sglang.srt.multimodal.kimi_k3_image_processing import DEFERRED_PREPROCESSING_KEY, KimiK3DeferredPreprocessing
from sglang.srt.multimodal.processors.kimi_k25 import _grid_thw_from_resize_config, navit_resize_config

GEOMETRY = {'patch_size': 1, 'merge_kernel_size': 1, 'in_patch_limit': 1, 'patch_limit_on_one_side': 2, 'fixed_output_tokens': None}
SIZES = [(1, 1), (1, 4)]  # (width, height) of the request's images, all deferred
OWNER = [1, 0]  # the images one vision-DP owner materializes: not 0..k-1


def _item(width, height):
    """A deferred item as the producer makes it: raw CHW uint8 pixels and the owner's parameters."""
    rc = navit_resize_config(width, height, **GEOMETRY)
    grid = _grid_thw_from_resize_config(rc, GEOMETRY["patch_size"])
    config = KimiK3DeferredPreprocessing("gpu", [0.5] * 3, [0.5] * 3, None, rc)
    return MultimodalDataItem(
        modality=Modality.IMAGE,
        feature=torch.zeros((3, height, width), dtype=torch.uint8),
        model_specific_data={"image_grid_thw": torch.tensor([grid]), DEFERRED_PREPROCESSING_KEY: config},
    )


def _owner_loader(items, monkeypatch):
    """The loader get_image_feature hands the DP runner, captured as SGLang's consumer tests capture it."""
    model = object.__new__(kimi_k3_model.KimiK3ForConditionalGeneration)
    torch.nn.Module.__init__(model)
    proj = types.SimpleNamespace(weight=torch.empty(0, dtype=torch.bfloat16))
    model.vision_tower = types.SimpleNamespace(
        device=torch.device("cpu"), patch_size=GEOMETRY["patch_size"], patch_embed=types.SimpleNamespace(proj=proj)
    )
    model.use_data_parallel, model.mm_projector, model._encoder_image_processor = True, (lambda x: x), None
    seen = {}
    monkeypatch.setattr(mm_utils, "run_dp_sharded_mrope_vision_model", lambda *a, **kw: seen.update(kw))
    parallel = types.SimpleNamespace(tp_size=1, attn_tp_size=1, tp_rank=0, attn_tp_rank=0)
    monkeypatch.setattr(kimi_k3_model, "get_parallel", lambda: parallel, raising=False)
    monkeypatch.setattr(kimi_k3_model, "configured_tp_size", lambda: 1, raising=False)
    model.get_image_feature(items)
    return seen["load_local_pixel_values"]


def test_c4_an_owner_materializes_any_subset_of_the_images(monkeypatch):
    """Each vision-DP owner materializes its own images, whatever their positions in the request."""
    items = [_item(w, h) for w, h in SIZES]
    features = _owner_loader(items, monkeypatch)(list(OWNER))
    patches = sum(int(items[i].model_specific_data["image_grid_thw"].prod()) for i in OWNER)
    assert features.shape[0] == patches, f"owner of images {OWNER}: {tuple(features.shape)}, {patches} patches"
