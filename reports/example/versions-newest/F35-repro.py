# deferlab reproducer (format 1): claim C14 on sglang-0.5.23
# Claim: C14: For every image class the checkpoint accepts (and uint8 arrays), the served pixel values equal the
#   checkpoint's, every differing element explained: at most 1 uint8 level off, and within the C15 allowance of
#   the checkpoint's normalization of the served level.
# System: sglang-0.5.23 (sglang 0.5.23, commit -)
# Spec: 0.5.23
# Model family: qwen2.5-vl (Qwen2.5-VL), the engine's default serving path
# Flaw: the served pixels of an image are more than one level off the checkpoint's
# Recorded failure: AssertionError: [RGBA partly transparent] 12x10: sglang-0.5.23 (qwen2.5-vl, served): 27598 of
#   28224 values unexplained (28170 differ, up to 255 levels off; first patch 0 channel 0 element 0: level 254
#   served, 239 trained)
# Counterexample: deferlab's minimal counterexample, from versions.json: ['RGBA partly transparent', 12, 10, 0]
# Written by: deferlab 0.1.0 (commit d24c675d3dc6)
# Run: pytest THIS_FILE where that engine is installed, or deferlab repro THIS_FILE --sglang SPEC (deferlab's
#   loader, with transformers, torchvision at the release's pins: no SGLang dependencies needed). It fails while the flaw is there and passes once it is fixed.
"""Reproducer of finding F35 (C14 on qwen2.5-vl:0.5.23): the served pixels of an image are more than one level off the checkpoint's."""

import json
import os
import tempfile
import types

import numpy as np
from PIL import Image
from transformers import AutoImageProcessor

from sglang.srt.multimodal.media_artifacts.base import MediaArtifactInput
from sglang.srt.multimodal.processors.base_processor import Modality
from sglang.srt.multimodal.processors.qwen_vl import QwenVLImageProcessor

# The checkpoint's preprocessor_config.json (deferlab's published 'qwen2.5-vl' profile):
CFG = {'min_pixels': 3136, 'max_pixels': 12845056, 'patch_size': 14, 'temporal_patch_size': 2, 'merge_size': 2, 'image_mean': [0.48145466, 0.4578275, 0.40821073], 'image_std': [0.26862954, 0.26130258, 0.27577711], 'image_processor_type': 'Qwen2VLImageProcessor', 'processor_class': 'Qwen2_5_VLProcessor'}
LOAD_FIRST = True  # the recorded load step: through _load_single_item first
# deferlab's minimal counterexample (image class, width, height, seed):
CASE = ('RGBA partly transparent', 12, 10, 0)


def _u8(rng, shape):
    return rng.integers(0, 256, size=shape).astype(np.uint8)


def _draw(rng, w, h):
    """A ``w`` x ``h`` image of class 'RGBA partly transparent' (CASE's), its pixels from ``rng``."""
    data = _u8(rng, (h, w, 4))
    data[0, 0, 3] = rng.integers(0, 255)  # at least one pixel is not opaque
    return Image.fromarray(data, "RGBA")


def _image():
    """The counterexample CASE = (image class, width, height, seed), drawn as deferlab draws it: NumPy's
    default_rng(seed), its draws in deferlab's order (properties.strategies.served.make_image)."""
    _, width, height, seed = CASE
    return _draw(np.random.default_rng(seed), width, height)

_FOLDERS = []  # the script's temporary folders, each removed when the script ends


def _checkpoint_folder(config=None):
    """A folder holding ``config`` (default CFG) as the checkpoint's preprocessor_config.json (what the release
    reads it from)."""
    _FOLDERS.append(tempfile.TemporaryDirectory(prefix="deferlab-repro-"))
    folder = _FOLDERS[-1].name
    with open(os.path.join(folder, "preprocessor_config.json"), "w") as f:
        json.dump(CFG if config is None else config, f)
    return folder



def _as_levels(values, ip):
    """(N, 3, T*p*p) int16: the uint8 level behind each value ``ip`` returned (N, 3*T*p*p), undoing its own
    normalize and rescale (each value is within far less than half a level of its level's)."""
    x = np.asarray(values, dtype=np.float64).reshape(len(values), 3, -1)
    if ip.do_normalize:
        x = x * np.asarray(ip.image_std).reshape(1, 3, 1) + np.asarray(ip.image_mean).reshape(1, 3, 1)
    if ip.do_rescale:
        x = x / ip.rescale_factor
    return np.rint(x).astype(np.int16)


def _checkpoint_rgb(image):
    """The checkpoint's RGB step (semantics §18.2.1, transformers' convert_to_rgb from 5.21.0): an image with a band
    named A or a transparency key is converted to RGBA and alpha-composited onto opaque white; any other is
    converted to RGB."""
    if "A" in image.getbands() or image.info.get("transparency") is not None:
        white = Image.new("RGBA", image.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, image.convert("RGBA")).convert("RGB")
    return image.convert("RGB")


def _trained_levels(image):
    """What the checkpoint's processor gives the tower, as levels: transformers' PIL backend for CFG
    (AutoImageProcessor, backend "pil": smart_resize, Pillow's resize, the patch layout) on the checkpoint's RGB
    image, rescale and normalize off. ((N, 3, T*p*p) int16, grid (t, h, w))."""
    ip = AutoImageProcessor.from_pretrained(_checkpoint_folder(), backend="pil")
    out = ip(images=[_checkpoint_rgb(image)], return_tensors="np", do_rescale=False, do_normalize=False)
    values = np.asarray(out["pixel_values"], dtype=np.float64)
    return np.rint(values).astype(np.int16).reshape(len(values), 3, -1), [int(v) for v in out["image_grid_thw"][0]]


def _served_levels(image):
    """What SGLang feeds the tower: QwenVLImageProcessor's image path, ((N, 3, T*p*p) levels, grid). LOAD_FIRST:
    the default of this family (preprocess cache off) loads each image through _load_single_item first (its RGB
    rule, discard_alpha_channel=True); then prepare_artifact_batch hands the images to the checkpoint's transformers
    image processor (AutoImageProcessor of CFG, the transformers SGLang pins, backend resolved by transformers) with
    return_tensors="pt". The processor is built as SGLang's unit tests build one (object.__new__ and the attributes
    the method reads: default server args, CPU transport, the cache off); _fast_image_processor_device answers None,
    what SGLang picks where no CUDA-alike platform is (a CUDA server passes cuda:<base_gpu_id>). The model's cast of
    the values to bfloat16 comes after and is not applied: the levels are read off the float32 values."""
    if LOAD_FIRST:
        image = QwenVLImageProcessor._load_single_item(image, Modality.IMAGE, discard_alpha_channel=True)
    proc = object.__new__(QwenVLImageProcessor)
    ip = AutoImageProcessor.from_pretrained(_checkpoint_folder())
    proc._processor, proc._tokenizer = types.SimpleNamespace(image_processor=ip), None
    proc.image_config, proc.disable_fast_image_processor, proc.mm_feature_transport = {}, False, "cpu"
    proc.mm_preprocess_cache = types.SimpleNamespace(enabled=False)
    proc._fast_image_processor_device = lambda processor: None
    snapshot = proc.snapshot_media_source(image, Modality.IMAGE)
    media = proc.decode_media_snapshot(snapshot, Modality.IMAGE)
    entry = MediaArtifactInput(snapshot.content_digest, snapshot.content_digest, Modality.IMAGE, media)
    (artifact,) = proc.prepare_artifact_batch([entry])
    grid = [int(v) for v in artifact.model_specific_data["image_grid_thw"][0]]
    return _as_levels(artifact.feature.float().numpy(), ip), grid


def test_c14_the_served_pixels_are_the_checkpoints():
    """The levels served for the counterexample must be the checkpoint's: the same grid, then every value of every
    patch at most one uint8 level off (C14's part (a), the resize arithmetic's allowance; the float ulps of the
    normalization are C15's). It prints the grids and the first differing elements, expected vs served."""
    image = _image()
    served, grid = _served_levels(image)
    trained, want = _trained_levels(image)
    print(f"grid (t, h, w): served {grid}, the checkpoint's {want}; values: served {served.shape}, the checkpoint's {trained.shape}")
    assert grid == want and served.shape == trained.shape, f"grid {grid} != the checkpoint's {want}"
    off = np.abs(served - trained)
    bad = np.argwhere(off > 1)
    for n, c, i in bad[:12]:
        print(f"patch {n} channel {c} element {i}: expected (trained) {trained[n, c, i]}, served {served[n, c, i]}")
    if len(bad):
        n, c, i = (int(v) for v in bad[0])
        raise AssertionError(
            f"{len(bad)} of {off.size} values more than 1 level off the checkpoint's ({int((off > 0).sum())} differ, "
            f"up to {int(off.max())} levels off; first patch {n} channel {c} element {i}: level {served[n, c, i]} "
            f"served, {trained[n, c, i]} trained)"
        )
