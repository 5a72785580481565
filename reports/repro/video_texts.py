"""The reproducer texts of the video and decoded-bytes claims (C16, C18, C20; semantics §20): the trained side's
call, each engine's call, and the tests, joined into the templates `reports.repro.video` fills.

Why these calls: C16-C18 are pixel-free (semantics §20.3), so a video reproducer builds only the clip's metadata
(frame count, frame rate, size) and hands it to the engine's own sampling code (the function deferlab runs, with
the same single stand-in where the engine reads the metadata off a decoder) and to the checkpoint's transformers
video processor (``sample_frames``, as ``BaseVideoProcessor.preprocess`` fills its kwargs). C20's reproducer builds
its image bytes with Pillow in the file (`properties.strategies.encoded`'s recipe, restated; a test checks the bytes
are the same), and hands them to the engine's own loader and to transformers' ``load_image``. Nothing here is an
engine's or transformers' code: the texts only call it.
"""

# --- video (C16, C18) ---------------------------------------------------------------------------------------------
VIDEO_IMPORTS = """
# Needs the engine, and transformers with torchvision (transformers' video processors are torchvision-backed).
import transformers
from transformers.video_utils import VideoMetadata
"""

_VIDEO_COMMON = '''
REFUSALS = (ValueError, AssertionError, ZeroDivisionError, TypeError, IndexError)


def _padded(indices, temporal_patch_size):
    """The frames after the processor's temporal padding: the last frame repeated to a multiple of the temporal
    patch (semantics §20.2: C16 compares the frames taken, repeats kept)."""
    indices = [int(i) for i in indices]
    return indices + indices[-1:] * (-len(indices) % temporal_patch_size)


def _answer(side):
    """A side's frames, or its refusal as one line: a request that fails there (two refusals agree)."""
    try:
        return side()
    except REFUSALS as e:
        return f"refused ({type(e).__name__}: {(str(e).splitlines() or [''])[0]})"


def _trained_indices():
    """The checkpoint's video processor (transformers, built by from_dict from its video config as
    from_pretrained builds it): it samples when its config says so or the request names fps / num_frames
    (apply_chat_template's rule), with every other sample_frames kwarg filled from the processor's own
    attributes, as BaseVideoProcessor.preprocess fills them (semantics §20.4); otherwise it takes every frame."""
    proc = getattr(transformers, PROCESSOR).from_dict(dict(VIDEO_CONFIG))
    given = {k: v for k, v in OPTIONS.items() if k in ("fps", "num_frames")}
    if not (proc.do_sample_frames or given):
        return list(range(FRAMES))
    kw = {name: given.get(name, getattr(proc, name, None)) for name in proc.valid_kwargs.__annotations__}
    for name in ("input_data_format", "do_convert_rgb", "do_sample_frames", "device", "video_metadata"):
        kw.pop(name, None)
    meta = VideoMetadata(total_num_frames=FRAMES, fps=FPS if FPS > 0 else None, width=WIDTH, height=HEIGHT)
    indices = [int(i) for i in proc.sample_frames(meta, **kw)]
    if max(indices) >= FRAMES:  # the processor's video[indices] on FRAMES decoded frames
        raise IndexError(f"index {max(indices)} is out of bounds for {FRAMES} frames (video[indices])")
    return indices
'''

VIDEO_C16_TEST = '''

def test_${cid}_video_frames_taken_equal_the_checkpoints(monkeypatch):
    """The source frames $served takes for the clip (indices in order, the processor's temporal repeats kept)
    equal the checkpoint's video processor's; a refusal on one side only is a difference, on both agreement."""
    tps = int(VIDEO_CONFIG["temporal_patch_size"])
    served = _answer(lambda: _padded(_served_indices(monkeypatch), tps))
    trained = _answer(lambda: _padded(_trained_indices(), tps))
    if isinstance(served, str) and isinstance(trained, str):
        return  # both sides refuse the request: they agree
    assert served == trained, f"frames taken {served} != the checkpoint's {trained}"
'''

VIDEO_C18_TEST = '''

def _times(indices, fps):
    """The prompt's timestamps of the frames taken: Qwen3VLProcessor's own _calculate_timestamps of the indices at
    ``fps``, what both sides' processors compute (each pairs the frames of a temporal patch and averages)."""
    from transformers.models.qwen3_vl.processing_qwen3_vl import Qwen3VLProcessor

    tps = int(VIDEO_CONFIG["temporal_patch_size"])
    return [float(t) for t in Qwen3VLProcessor._calculate_timestamps(None, list(indices), fps, tps)]


def test_${cid}_video_times_equal_the_checkpoints(monkeypatch):
    """The times the model is told each temporal grid step sits at equal the checkpoint's within 1e-6 s (semantics
    §20.2, C18); a refusal on one side only is a difference, on both agreement."""
    # the served metadata carries the container's rate as read (0.0 when unknown); the checkpoint's processor
    # falls back to 24 for an unknown rate (replace_video_token)
    served = _answer(lambda: _times(_served_indices(monkeypatch), FPS))
    trained = _answer(lambda: _times(_trained_indices(), FPS if FPS > 0 else 24))
    if isinstance(served, str) and isinstance(trained, str):
        return
    assert not isinstance(served, str) and not isinstance(trained, str), f"times {served} != {trained}"
    assert len(served) == len(trained), f"{len(served)} times {served} != the checkpoint's {len(trained)} {trained}"
    assert all(abs(a - b) <= 1e-6 for a, b in zip(served, trained)), f"times {served} != {trained}"
'''

LMDEPLOY_VIDEO_IMPORTS = """
import inspect

from lmdeploy.vl.media.video import VideoMediaIO
from lmdeploy.vl.media.video_loader import OpenCVVideoLoader, VideoLoader
"""

LMDEPLOY_VIDEO = (
    _VIDEO_COMMON
    + '''

def _served_indices(monkeypatch):
    """LMDeploy's frames: VideoLoader.smart_nframes with the arguments OpenCVVideoLoader.load_bytes hands it (the
    request's media_io_kwargs['video'] num_frames, else VideoMediaIO's default, and fps, else the loader's;
    duration = frames / fps, 0 when unknown), its processor keeps them as taken (do_sample_frames=False). A single frame, which the processor then refuses, is kept as one frame here."""
    num_frames = OPTIONS.get("num_frames", inspect.signature(VideoMediaIO).parameters["num_frames"].default)
    fps = OPTIONS.get("fps", inspect.signature(OpenCVVideoLoader.load_bytes).parameters["fps"].default)
    duration = FRAMES / FPS if FPS > 0 else 0
    _, indices = VideoLoader.smart_nframes(FRAMES, num_frames, fps, duration)
    return [int(i) for i in indices]
'''
)

VLLM_VIDEO_IMPORTS = """
import numpy as np
import vllm.multimodal.video as vllm_video
from vllm.multimodal.media.image import ImageMediaIO
from vllm.multimodal.media.video import VideoMediaIO
"""

VLLM_VIDEO = (
    _VIDEO_COMMON
    + '''

def _served_indices(monkeypatch):
    """vLLM's frames: VideoMediaIO.load_bytes with the request's media_io_kwargs['video'] and the loader vLLM picks
    for the checkpoint's video processor class; its loader's own compute_frames_index_to_sample chooses. One
    stand-in, the codec call (vllm.multimodal.video.decode_video): it reports the clip's metadata as OpenCV reads
    it and serves each chosen frame once, in increasing order, as a 1x1 frame (OpenCV's read_frames). The
    processor keeps the frames as they come (no resampling for this family) (semantics §20.6)."""

    def decode_video(backend, loader_cls, data, target, sampling_kwargs, backend_kwargs, *, frame_recovery):
        duration = FRAMES / FPS if FPS > 0 else 0.0
        source = loader_cls._prepare_source(vllm_video.VideoSourceMetadata(FRAMES, FPS, duration))
        chosen = loader_cls.compute_frames_index_to_sample(source=source, target=target, **sampling_kwargs)
        valid = sorted(set(chosen))
        return np.zeros((len(valid), 1, 1, 3), np.uint8), source, chosen, valid

    monkeypatch.setattr(vllm_video, "decode_video", decode_video)
    kwargs = dict(VideoMediaIO.merge_kwargs(None, dict(MEDIA_IO_KWARGS)))
    kwargs.setdefault("video_backend", vllm_video.get_video_loader_backend_for_processor(PROCESSOR))
    _, metadata = VideoMediaIO(ImageMediaIO(), **kwargs).load_bytes(b"").media
    return [int(i) for i in metadata["frames_indices"]]
'''
)

SGLANG_VIDEO_IMPORTS = """
import asyncio

import torch
from sglang.srt.multimodal.processors import qwen_vl
from sglang.srt.utils.video_decoder import VideoDecoderWrapper
"""

SGLANG_VIDEO = (
    _VIDEO_COMMON
    + '''

class ClipReader(VideoDecoderWrapper):
    """The clip's metadata as SGLang's decoder wrapper reports it (frame count, average fps); black frames of its
    size; records the indices preprocess_video asks for. No decoder is opened."""

    def __init__(self):
        self.asked = None

    def __len__(self):
        return FRAMES

    @property
    def avg_fps(self):
        return FPS

    def get_frames_as_tensor(self, indices):
        self.asked = [int(i) for i in indices]
        return torch.zeros((len(self.asked), HEIGHT, WIDTH, 3), dtype=torch.uint8)

    def close(self):
        return None


def _served_indices(monkeypatch):
    """SGLang's frames: its own preprocess_video (smart_nframes, then the indices it computes inline) with the
    server's video config, on the clip's reader; its processor keeps them (do_sample_frames=False). is_cpu answers True: no pin_memory on a machine without CUDA."""
    monkeypatch.setattr(qwen_vl, "is_cpu", lambda: True)
    reader = ClipReader()
    asyncio.run(qwen_vl.preprocess_video(reader, video_config=dict(SERVER_VIDEO_CONFIG)))
    return [int(i) for i in reader.asked]
'''
)

# --- decoded bytes (C20) ------------------------------------------------------------------------------------------
BYTES_IMPORTS = """
import io
import os
import struct
import tempfile
import zlib

import numpy as np
from PIL import Image, ImageCms, ImageFile
from transformers.image_utils import load_image
"""

_MAKE_BYTES = '''

def _rgb(w, h, seed, shift=0):
    """(h, w, 3) uint8: a gradient plus noise, no symmetry (a mirror or transpose changes it)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([x * 255 // max(w - 1, 1), y * 255 // max(h - 1, 1), (x + 2 * y + shift * 85) % 256], -1)
    return ((base + rng.integers(0, 64, (h, w, 3))) % 256).astype(np.uint8)


def _alpha(w, h, seed):
    """(h, w) uint8: opaque, transparent and half-transparent bands."""
    rng = np.random.default_rng(seed + 1)
    a = np.full((h, w), 255, np.uint8)
    a[:, : w // 3] = 0
    a[:, w // 3 : 2 * w // 3] = rng.integers(1, 255, (h, 2 * w // 3 - w // 3))
    return a


def _save(image, fmt, **options):
    buf = io.BytesIO()
    image.save(buf, fmt, **options)
    return buf.getvalue()


def _chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _make_bytes(cls, w, h, seed):
    """The bytes a client sends: an image of class ``cls`` (w x h stored), made with Pillow here."""
    rgb = Image.fromarray(_rgb(w, h, seed))
    if cls in ("RGB JPEG", "RGB PNG"):
        return _save(rgb, cls.split()[1], **({"quality": 90} if "JPEG" in cls else {}))
    if cls.startswith("JPEG EXIF"):
        exif = Image.Exif()
        exif[0x0112] = int(cls.rsplit(" ", 1)[1])  # the EXIF orientation tag
        return _save(rgb, "JPEG", quality=90, exif=exif.tobytes())
    if cls in ("CMYK JPEG", "YCCK JPEG"):
        cmyk = _save(rgb.convert("CMYK"), "JPEG", quality=90)
        at = cmyk.find(b"Adobe")  # YCCK: the Adobe APP14 transform byte set to 2 (Pillow has no YCCK writer)
        return cmyk if cls == "CMYK JPEG" else cmyk[: at + 11] + b"\\x02" + cmyk[at + 12 :]
    if cls == "progressive JPEG":
        return _save(rgb, "JPEG", quality=90, progressive=True)
    if cls == "I;16 PNG":
        g = _rgb(w, h, seed)[..., 0].astype(np.uint16) * 257 + np.arange(w, dtype=np.uint16)
        return _save(Image.fromarray(g.astype("<u2")), "PNG")
    if cls == "I TIFF":
        g = _rgb(w, h, seed)[..., 0].astype(np.int32) * 65536 - 2**30
        return _save(Image.fromarray(g.astype("<i4")), "TIFF")
    if cls == "P PNG tRNS":
        pal = rgb.quantize(16, dither=Image.Dither.NONE)
        return _save(pal, "PNG", transparency=bytes([0, 128, 255] + [255] * 13))
    if cls == "LA PNG":
        return _save(Image.fromarray(np.stack([_rgb(w, h, seed)[..., 1], _alpha(w, h, seed)], -1)), "PNG")
    if cls == "RGBA PNG":
        return _save(Image.fromarray(np.dstack([_rgb(w, h, seed), _alpha(w, h, seed)])), "PNG")
    if cls == "ICC PNG":
        profile = ImageCms.ImageCmsProfile(ImageCms.createProfile("XYZ"))  # not sRGB
        return _save(rgb, "PNG", icc_profile=profile.tobytes())
    if cls.startswith("animated") or cls == "APNG":
        frames = [Image.fromarray(_rgb(w, h, seed, shift=k)) for k in range(3)]
        fmt, opts = {"animated GIF": ("GIF", {}), "animated WebP": ("WEBP", {"lossless": True}),
                     "APNG": ("PNG", {})}[cls]
        return _save(frames[0], fmt, save_all=True, append_images=frames[1:], duration=100, loop=0, **opts)
    if cls.startswith("truncated"):
        whole = _save(rgb, cls.split()[1])
        data = whole.find(b"\\xff\\xda" if "JPEG" in cls else b"IDAT")  # cut inside the image data
        return whole[: data + (len(whole) - data) // 2]
    if cls == "corrupt JPEG":
        whole = _save(rgb, "JPEG", quality=90)
        sos = whole.find(b"\\xff\\xda")
        junk = np.random.default_rng(seed).integers(0, 255, len(whole) - sos, dtype=np.uint8).tobytes()
        return whole[: sos + 14] + junk.replace(b"\\xff", b"\\x00") + b"\\xff\\xd9"
    # "bomb PNG": a valid PNG whose header declares over twice Pillow's MAX_IMAGE_PIXELS
    width = 20_000
    height = (2 * Image.MAX_IMAGE_PIXELS + 1) // width + 1
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    idat = zlib.compress(b"\\x00" * (width + 1))
    return b"\\x89PNG\\r\\n\\x1a\\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", idat) + _chunk(b"IEND", b"")
'''

_BYTES_COMMON = (
    _MAKE_BYTES
    + '''

def _file(data):
    """The bytes as the file a client names (a file: URL's target), in a folder of their own."""
    folder = tempfile.mkdtemp(prefix="deferlab-repro-")
    path = os.path.join(folder, "image" + SUFFIX)
    with open(path, "wb") as f:
        f.write(data)
    return path


def _answer(load, data):
    """(the image as size, mode and uint8 pixels) or the refusal's one line: a side's answer for the bytes."""
    try:
        image = load(data)
        return image.size, image.mode, np.asarray(image)
    except Exception as e:  # Pillow's refusals: OSError, DecompressionBombError, SyntaxError, ...
        return f"refused ({type(e).__name__}: {(str(e).splitlines() or [''])[0]})"


def _trained(data):
    """transformers' load_image of the same request (the data URI, or the file's path), with Pillow's default
    flags, as the checkpoint's own process has them (an engine's import may have changed them in this one)."""
    was = ImageFile.LOAD_TRUNCATED_IMAGES
    ImageFile.LOAD_TRUNCATED_IMAGES = False
    try:
        if KIND == "data-uri":
            import base64

            return _answer(load_image, f"data:{MEDIA_TYPE};base64," + base64.b64encode(data).decode("ascii"))
        return _answer(load_image, _file(data))
    finally:
        ImageFile.LOAD_TRUNCATED_IMAGES = was


def test_${cid}_decoded_bytes_equal_the_checkpoints():
    """$served's image of the bytes equals load_image's: size, mode, every pixel bitwise; a refusal on one side
    only is a difference, a refusal on both agreement (semantics §20.8)."""
    data = _make_bytes(CLS, WIDTH, HEIGHT, SEED)
    served, trained = _served(data), _trained(data)
    if isinstance(served, str) and isinstance(trained, str):
        return  # both refuse the bytes: they agree
    assert not isinstance(served, str), f"the served side refused what the trained side takes: {served}"
    assert not isinstance(trained, str), f"the served side took what the trained side refuses: {trained}"
    assert served[:2] == trained[:2], f"size, mode {served[:2]} != the checkpoint's {trained[:2]}"
    differ = (served[2] != trained[2]).reshape(served[2].shape[0], served[2].shape[1], -1).any(axis=-1)
    if differ.any():
        y, x = (int(i) for i in np.argwhere(differ)[0])
        raise AssertionError(
            f"{int(differ.sum())} of {differ.size} pixels differ (first at ({y}, {x}): served "
            f"{served[2][y, x].tolist()}, trained {trained[2][y, x].tolist()})"
        )
'''
)

SGLANG_BYTES_IMPORTS = """
import pathlib

from sglang.srt.multimodal.processors.base_processor import BaseMultimodalProcessor, Modality
"""

SGLANG_BYTES = '''

def _served(data):
    """SGLang's loader of an image_url: BaseMultimodalProcessor._load_single_item (load_image, then RGB) on the file
    as a file:// URL; a data URI's decoded bytes (pybase64's step) go to the same function."""
    request = data if KIND == "data-uri" else pathlib.Path(_file(data)).as_uri()
    return _answer(lambda r: BaseMultimodalProcessor._load_single_item(r, Modality.IMAGE), request)
'''

VLLM_BYTES_IMPORTS = """
import pathlib

from vllm.multimodal.media.connector import MediaConnector
"""

VLLM_BYTES = '''

def _served(data):
    """vLLM's loader of an image_url: MediaConnector.fetch_image on the file as a file: URL under
    --allowed-local-media-path; a data URI's decoded bytes (pybase64's step) go to the connector's own
    ImageMediaIO.load_bytes, where load_base64 hands them."""
    path = _file(data)
    connector = MediaConnector(allowed_local_media_path=os.path.dirname(path))
    if KIND == "data-uri":
        return _answer(connector._image_io("RGB").load_bytes, data)
    return _answer(connector.fetch_image, pathlib.Path(path).as_uri())
'''

LMDEPLOY_BYTES_IMPORTS = """
import pathlib

from lmdeploy.vl.media.connection import load_from_url
from lmdeploy.vl.media.image import ImageMediaIO
"""

LMDEPLOY_BYTES = '''

def _served(data):
    """LMDeploy's loader of an image_url: load_from_url(url, ImageMediaIO()) on the file as a file: URL; a data
    URI's decoded bytes (pybase64's step) go to ImageMediaIO.load_bytes. It runs with the Pillow flags LMDeploy's
    import left (lmdeploy.vl.media.image sets LOAD_TRUNCATED_IMAGES for its whole process)."""
    if KIND == "data-uri":
        return _answer(ImageMediaIO().load_bytes, data)
    return _answer(lambda url: load_from_url(url, ImageMediaIO()), pathlib.Path(_file(data)).as_uri())
'''

BYTES = {
    "sglang": (SGLANG_BYTES_IMPORTS, SGLANG_BYTES),
    "vllm": (VLLM_BYTES_IMPORTS, VLLM_BYTES),
    "lmdeploy": (LMDEPLOY_BYTES_IMPORTS, LMDEPLOY_BYTES),
}
BYTES_TEST = _BYTES_COMMON
