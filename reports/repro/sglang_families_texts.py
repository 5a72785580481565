"""The texts of the reproducers of SGLang's own-code family paths (semantics §18.9): ERNIE-4.5-VL's and MiMo-V2.5's
geometry (C13) and pixels (C14), PaddleOCR-VL's pixels (C14), MiniCPM-V 4.6's normalization (C15), joined by
`reports.repro.sglang_families`.

Why these texts: each of these processors resizes, loads or normalizes with SGLang's own code, so each file calls
that code (the function its finding names, and the steps deferlab's path runs around it) from the release the loader
put in place, with the transformers and torchvision it pins. The trained side is stated as semantics §18.9 states it:
the checkpoint processor's ``smart_resize`` (§18.2's arithmetic) with the published bounds for C13; transformers' PIL
backend run on the checkpoint's RGB image for C14 (`reports.repro.qwen_pixels_texts.COMMON`, as the Qwen files run
it); §18.1's normalization for C15 (`reports.repro.family_texts.TRAINED_LEVELS`). A processor is built by its own
``__init__``, only the serving stack's base ``__init__`` answered (`BUILT`), as deferlab's paths build it.
"""

from deferlab.reports.repro import family_texts

BUILT = '''

def _built(cls, hf_config, processor):
    """SGLang's processor ``cls`` built by its own __init__; the serving stack's BaseMultimodalProcessor.__init__
    (executors, the preprocess cache, the runtime context: nothing this path reads) answered for that one call by
    one that sets the three attributes it sets first."""
    from unittest import mock

    def stack_init(self, hf_config, server_args, _processor, *args, **kwargs):
        self.hf_config, self.server_args, self._processor = hf_config, server_args, _processor

    proc = object.__new__(cls)
    with mock.patch.object(BaseMultimodalProcessor, "__init__", stack_init):
        cls.__init__(proc, hf_config, None, processor)
    return proc
'''

# --- C13: the resize target ------------------------------------------------------------------------------------------
C13_TEST = (
    """

"""
    + family_texts.CARD_SMART_RESIZE
    + '''

_card_target = _card_smart_resize  # the checkpoint's target, as the rest of the file names it


def _described(target, width, height):
    """'WxH grid (1, h/PATCH, w/PATCH) N tokens' of ``target``'s (height, width) for the size (a token per
    MERGE x MERGE patches), or 'refused' where it raises ValueError."""
    try:
        h, w = (int(v) for v in target(height, width))
    except ValueError:
        return "refused"
    return f"{w}x{h} grid (1, {h // PATCH}, {w // PATCH}) {h * w // (PATCH * MERGE) ** 2} tokens"


def test_${cid}_the_served_resize_is_the_checkpoints():
    """The size an image of SIZE (width, height) is served at, and so its grid and prompt tokens, must be the
    checkpoint's (C13). It prints both."""
    served, want = _described(_served_target, *SIZE), _described(_card_target, *SIZE)
    print(f"{SIZE[0]}x{SIZE[1]}: served {served}; the checkpoint's {want}")
    assert served == want, f"{SIZE[0]}x{SIZE[1]}: served {served} != checkpoint's {want}"
'''
)

ERNIE_C13_IMPORTS = """
import math

from PIL import Image
from transformers.models.ernie4_5_vl_moe.image_processing_ernie4_5_vl_moe import smart_resize as processor_smart_resize

from sglang.srt.multimodal.processors import ernie45_vl
"""

ERNIE_C13_SERVED = '''

def _served_target(height, width):
    """SGLang's ERNIE-4.5-VL geometry (height, width): process_mm_data_async runs the module's resize_image on each
    decoded image (its own smart_resize with the module's IMAGE_FACTOR, MIN_PIXELS and MAX_PIXELS, a side ratio over
    200 clamped rather than refused, then Pillow's resize), read off the image it returns for a blank one of the size;
    the checkpoint's processor then resizes that image again with its own smart_resize (its remote code is not run:
    transformers' ernie4_5_vl_moe smart_resize at SGLang's pin, with the checkpoint's FACTOR and bounds, stands for
    it, as in deferlab's path)."""
    width, height = ernie45_vl.resize_image(Image.new("RGB", (width, height))).size
    return processor_smart_resize(height, width, FACTOR, min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS)
'''

MIMO_PROCESSOR = '''

def _mimo_processor():
    """SGLang's MiMoProcessor with the defaults MiMoV2Processor.__init__ passes where the checkpoint's
    processor_config names no image bounds (4 and 4096 squares of patch_size * merge_size; the checkpoint's
    config.json is not read): MiMoProcessor.from_hf_config of such a model config, use_video_timestamps on (the one
    key its __init__ requires), no device (the CPU)."""
    hf_config = types.SimpleNamespace(
        processor_config={"use_video_timestamps": True}, audio_config=None, vision_config={}
    )
    return mimo_v2.MiMoProcessor.from_hf_config(hf_config)
'''

MIMO_C13_IMPORTS = """
import math
import types

from PIL import Image

from sglang.srt.multimodal.processors import mimo_v2
"""

MIMO_C13_SERVED = '''

def _served_target(height, width):
    """SGLang's MiMo-V2.5 geometry (height, width): process_image runs get_visual_transform with the factor
    (patch_size * merge_size) and the processor's default image bounds, so MiMoProcessor.smart_resize decides the
    size (a short side under the factor scaled up first, then rounded and scaled into those bounds); read off the
    tensor it returns for a blank image of the size."""
    image = mimo_v2.ImageInput(image=Image.new("RGB", (width, height)))
    return tuple(_mimo_processor().process_image(image).shape[-2:])
'''

# --- C14: the pixels -------------------------------------------------------------------------------------------------
ERNIE_C14_IMPORTS = """
import torch

from sglang.srt.managers.schedule_batch import Modality
from sglang.srt.multimodal.processors import ernie45_vl
from sglang.srt.multimodal.processors.base_processor import BaseMultimodalProcessor
"""

ERNIE_C14_SERVED = '''

def _served_levels(image):
    """What SGLang feeds the tower for ERNIE-4.5-VL, as levels ((N, 3, p*p), grid): the image through the class's
    _load_single_item (discard_alpha_channel=True, as load_mm_data passes it: a non-RGB image convert("RGB"), its
    alpha or key dropped), the module's resize_image (its smart_resize, Pillow's resize), the checkpoint's processor
    (its remote code is not run: transformers' PIL ERNIE processor of CFG at SGLang's pin, rescale and normalize
    off, stands for it, the levels its "images" hold, as in deferlab's path), then the class's own
    _pixel_values_norm (the processor built by its own __init__; the image processor's statistics; a float32 model,
    so its cast keeps the values), each value read back through those statistics as its level."""
    loaded = ernie45_vl.Ernie4_5_VLImageProcessor._load_single_item(image, Modality.IMAGE, discard_alpha_channel=True)
    ip = AutoImageProcessor.from_pretrained(_checkpoint_folder(), backend="pil")
    out = ip(images=[ernie45_vl.resize_image(loaded)], return_tensors="pt", do_rescale=False, do_normalize=False)
    # token ids: stand-ins (the prompt is not built here; the pixel path reads none of them)
    ids = {"image_start_token_id": 1, "image_end_token_id": 2, "video_start_token_id": 3, "video_end_token_id": 4}
    hf_config = types.SimpleNamespace(
        model_type="ernie4_5_moe_vl", vision_config=types.SimpleNamespace(patch_size=ip.patch_size),
        dtype=torch.float32, im_patch_id=5, **ids,
    )
    hf = types.SimpleNamespace(tokenizer=types.SimpleNamespace(), image_processor=ip)
    proc = _built(ernie45_vl.Ernie4_5_VLImageProcessor, hf_config, hf)
    values = proc._pixel_values_norm(out["pixel_values"], {})
    return _as_levels(values.float().numpy(), ip), [int(v) for v in out["image_grid_thw"][0]]
'''

GLM_C14_IMPORTS = """
from sglang.srt.managers.schedule_batch import Modality
from sglang.srt.multimodal.processors import glm4v
"""

GLM_C14_SERVED = '''

def _served_levels(image):
    """What SGLang feeds the tower for GLM-4.1V, as levels ((N, 3, T*p*p), grid): the image through the class's own
    _load_single_item (discard_alpha_channel=True, as load_mm_data passes it; from 0.5.20 its smart_rgb_conversion:
    EXIF transpose, transparency composited onto a background chosen from the border), then the checkpoint's
    transformers image processor (AutoImageProcessor of CFG at SGLang's pin, its own backend resolution: the
    torchvision one) called as process_mm_data calls it on a host without CUDA; the model's cast to bfloat16 comes
    after and is not applied: the levels are read off the float32 values."""
    loaded = glm4v.Glm4vImageProcessor._load_single_item(image, Modality.IMAGE, discard_alpha_channel=True)
    ip = AutoImageProcessor.from_pretrained(_checkpoint_folder())
    out = ip(images=[loaded], return_tensors="pt")
    return _as_levels(out["pixel_values"].float().numpy(), ip), [int(v) for v in out["image_grid_thw"][0]]
'''

MIMO_C14_IMPORTS = """
from sglang.srt.managers.schedule_batch import Modality
from sglang.srt.multimodal.processors import mimo_v2
"""

MIMO_C14_SERVED = '''

def _served_levels(image):
    """What SGLang feeds the tower for MiMo-V2.5 ((N, 3, T*p*p), grid): the image through MiMoV2Processor's
    _load_single_item (discard_alpha_channel=True: alpha and key dropped), then MiMoProcessor's own
    _process_image_content (process_image: get_visual_transform's convert("RGB"), smart_resize, F.interpolate
    bilinear on float32 levels, standardize_batch with the module's mean and std; _flatten_visual_inputs: the patch
    layout, the frame repeated over the temporal patch), float32 (before the model's cast). Each value is read back
    through the module's mean and std as the level it stands for, unrounded (a float resize lands between levels)."""
    loaded = mimo_v2.MiMoV2Processor._load_single_item(image, Modality.IMAGE, discard_alpha_channel=True)
    content = mimo_v2.Content(type="image", content=mimo_v2.ImageInput(image=loaded))
    out = _mimo_processor()._process_image_content(content, False)
    values = out["pixel_values"].double().numpy()
    mean = mimo_v2._QWEN2VL_PIXEL_MEAN.double().numpy().reshape(1, 3, 1)
    std = mimo_v2._QWEN2VL_PIXEL_STD.double().numpy().reshape(1, 3, 1)
    return values.reshape(len(values), 3, -1) * std + mean, [int(v) for v in out["thw_grid"]]
'''

MIMO_C14_TEST = '''

ON_A_LEVEL = 1e-3  # how near a level a value read back must be to stand for it (float32 rounding is far less)


def test_${cid}_the_served_pixels_are_the_checkpoints():
    """The values served for the counterexample must be the checkpoint's: the same grid, then every value one of the
    checkpoint's levels (its processor hands the tower uint8 levels, rescaled and normalized) at most one level off
    (C14's part (a); the float ulps of the normalization are C15's). It prints the grids and the first elements
    that are not, expected vs served."""
    image = _image()
    served, grid = _served_levels(image)
    trained, want = _trained_levels(image)
    print(f"grid (t, h, w): served {grid}, the checkpoint's {want}; values: served {served.shape}, the checkpoint's {trained.shape}")
    assert grid == want and served.shape == trained.shape, f"grid {grid} != the checkpoint's {want}"
    level = np.rint(served).astype(np.int16)
    off = np.abs(level - trained)
    bad = np.argwhere((off > 1) | (np.abs(served - level) > ON_A_LEVEL))
    for n, c, i in bad[:12]:
        print(f"patch {n} channel {c} element {i}: expected (trained) {trained[n, c, i]}, served {served[n, c, i]:.4f}")
    if len(bad):
        n, c, i = (int(v) for v in bad[0])
        raise AssertionError(
            f"{len(bad)} of {off.size} values not a level within 1 of the checkpoint's ({int((off > 0).sum())} levels "
            f"differ, up to {int(off.max())} levels off; first patch {n} channel {c} element {i}: level {level[n, c, i]} "
            f"served, {trained[n, c, i]} trained; read back as {served[n, c, i]:.4f})"
        )
'''

PADDLE_CLASS = ("sglang.srt.multimodal.processors.qwen_vl", "QwenVLImageProcessor", "PaddleOCRVLImageProcessor")

# --- C15: the normalization ------------------------------------------------------------------------------------------
MINICPM_C15_IMPORTS = """
import inspect
import types

import numpy as np
from PIL import Image

from sglang.srt.multimodal.processors.base_processor import BaseMultimodalProcessor
from sglang.srt.multimodal.processors.minicpmv4_6 import MiniCPMV4_6MultimodalProcessor
"""

MINICPM_C15_SERVED = '''

SIDE = 448  # the image processor's scale_resolution: a square of it is one piece at its own size (no slice, no resize)


def _served_levels():
    """What SGLang's MiniCPM-V 4.6 path gives each level (3, 256): MiniCPMV4_6MultimodalProcessor built by its own
    __init__ (which builds SGLang's own MiniCPMV4_6ImageProcessor: its slice settings, the vision config's patch 14,
    and the class's default mean, std and rescale factor, not read from the checkpoint), then its _preprocess_images
    (the image processor's preprocess: a float tensor, the slice grid, torchvision's resize, _normalize, the NaViT
    packing) on a SIDE x SIDE image holding every level in every channel (one piece at its own size: no slicing, the
    resize an identity); float32 (before the model's cast), unpacked and read per level."""
    hf_config = types.SimpleNamespace(
        vision_config=types.SimpleNamespace(patch_size=14), image_token_id=None, video_token_id=None
    )
    tokenizer = types.SimpleNamespace(convert_tokens_to_ids=lambda tokens: [None] * len(tokens))
    proc = _built(MiniCPMV4_6MultimodalProcessor, hf_config, tokenizer)
    ramp = (np.arange(SIDE * SIDE) % 256).astype(np.uint8).reshape(SIDE, SIDE)
    handed = len(inspect.signature(proc._preprocess_images).parameters) == 2  # 0.5.23 hands the image processor in
    extra = [proc.image_processor] if handed else []
    pixel_values, sizes, grids = proc._preprocess_images([Image.fromarray(np.stack([ramp] * 3, axis=-1))], *extra)
    assert len(pixel_values[0]) == 1 and list(grids[0]) == [0, 0], f"the level image was sliced ({grids[0]})"
    p = proc.image_processor.patch_size
    rows, cols = (int(s) for s in sizes[0][0])
    # (C, p, rows*cols*p): patch b's row i at [:, i, b*p:(b+1)*p], patches row-major over the image
    canvas = pixel_values[0][0].float().numpy().reshape(3, p, rows, cols, p).transpose(0, 2, 1, 3, 4)
    per_level = canvas.reshape(3, -1, 256)  # [c, k, u]: the k-th pixel of level u
    assert (per_level == per_level[:, :1]).all(), "a level came out as two values: the image was not kept as is"
    return np.ascontiguousarray(per_level[:, 0])
'''
