# deferlab reproducer (format 1): claim C19 on lmdeploy-0.18.0
# Claim: C19: For every frame both sides take from an encoded clip, the served pixel values equal the trained
#   side's, every differing element explained as C14 does.
# System: lmdeploy-0.18.0 (lmdeploy 0.18.0, commit -)
# Spec: 0.18.0
# Model family: qwen3-vl (Qwen3-VL), the engine's default serving path
# Flaw: the frames a served video loader takes from a client's clip, or their pixels, differ from the checkpoint's
# Recorded failure: AssertionError: [constant; defaults] pixels differ from the trained side's: frames taken (read
#   back) index 1: 3 != 17
# Counterexample: deferlab's minimal counterexample, from versions.json: ['constant', "ClipSpec(frames=120,
#   fps=30.0, width=64, height=48, container='mp4', vfr=False, rotation=0)"]
# Written by: deferlab 0.1.0 (commit d24c675d3dc6)
# Run: pytest THIS_FILE where that engine is installed, or deferlab repro THIS_FILE --lmdeploy SPEC (deferlab's
#   loader, with transformers, torchvision at the release's pins: no LMDeploy dependencies needed). It fails while the flaw is there and passes once it is fixed.
"""Reproducer of finding F2 (C19 on qwen3-vl:lmdeploy-0.18.0): the frames a served video loader takes from a client's clip, or their pixels, differ from the checkpoint's."""

# Needs the engine, PyAV (the clip), and transformers with torchvision (the checkpoint's video processor).
import io
import os
import pathlib
import tempfile
from fractions import Fraction
from functools import partial

import av
import numpy as np
import pytest
import transformers
from transformers.video_utils import load_video
import base64

from lmdeploy.vl.media.connection import load_from_url
from lmdeploy.vl.media.image import ImageMediaIO
from lmdeploy.vl.media.video import VideoMediaIO

# The clip kinds deferlab's counterexample and evidence name (properties.clips), made below with
# PyAV: frames, fps, size, container, rate as a fraction, VFR and its seed, rotation (semantics §20.3)
KINDS = {
    'constant': {'frames': 120, 'fps': 30.0, 'width': 64, 'height': 48, 'container': 'mp4', 'vfr': False, 'rotation': 0, 'rate': (30, 1)},
    'ntsc': {'frames': 120, 'fps': 29.97002997002997, 'width': 64, 'height': 48, 'container': 'mp4', 'vfr': False, 'rotation': 0, 'rate': (30000, 1001)},
    'vfr': {'frames': 120, 'fps': 30.0, 'width': 64, 'height': 48, 'container': 'mp4', 'vfr': True, 'rotation': 0, 'rate': (30, 1), 'vfr_seed': 583496991},
    'one': {'frames': 1, 'fps': 30.0, 'width': 64, 'height': 48, 'container': 'mp4', 'vfr': False, 'rotation': 0, 'rate': (30, 1)},
    'long': {'frames': 310, 'fps': 1.0, 'width': 64, 'height': 48, 'container': 'mp4', 'vfr': False, 'rotation': 0, 'rate': (1, 1)},
    'odd': {'frames': 120, 'fps': 30.0, 'width': 63, 'height': 47, 'container': 'mp4', 'vfr': False, 'rotation': 0, 'rate': (30, 1)},
    'rotation90': {'frames': 120, 'fps': 30.0, 'width': 64, 'height': 48, 'container': 'mp4', 'vfr': False, 'rotation': 90, 'rate': (30, 1)},
    'webm': {'frames': 60, 'fps': 30.0, 'width': 64, 'height': 48, 'container': 'webm', 'vfr': False, 'rotation': 0, 'rate': (30, 1)},
}
# The request's options (none: the claim runs each side's loader at its defaults)
OPTIONS = {}
# The checkpoint's video processor (qwen3-vl) and its config (semantics §20.4)
PROCESSOR = 'Qwen3VLVideoProcessor'
VIDEO_CONFIG = {
    'size': {
        'longest_edge': 25165824,
        'shortest_edge': 4096,
    },
    'patch_size': 16,
    'merge_size': 2,
    'temporal_patch_size': 2,
    'image_mean': [0.5, 0.5, 0.5],
    'image_std': [0.5, 0.5, 0.5],
    'processor_class': 'Qwen3VLProcessor',
    'video_processor_type': 'Qwen3VLVideoProcessor',
}


_GREY, _LOW, _HIGH, _COLS, _ROWS = 128, 96, 160, 5, 4  # 16 index bits and 4 check bits, 5 x 4 blocks


def _cells(height, width):
    """(top, bottom, left, right) of each bit's block, row-major, inside a grey margin of an eighth of each side."""
    my, mx = height // 8, width // 8
    ys = np.linspace(my, height - my, _ROWS + 1).round().astype(int)
    xs = np.linspace(mx, width - mx, _COLS + 1).round().astype(int)
    return [(ys[r], ys[r + 1], xs[c], xs[c + 1]) for r in range(_ROWS) for c in range(_COLS)]


def _check(index):
    """4 check bits: the XOR of the index's nibbles, XOR 0b1010 (a turned or mirrored frame fails it)."""
    return (index ^ index >> 4 ^ index >> 8 ^ index >> 12 ^ 0b1010) & 0xF


def _index_frame(height, width, index):
    """A grey RGB frame carrying ``index`` as black and white blocks (greys only: 4:2:0 chroma cannot flip a bit)."""
    frame = np.full((height, width, 3), _GREY, dtype=np.uint8)
    code = index | _check(index) << 16
    for bit, (t, b, left, r) in enumerate(_cells(height, width)):
        frame[t:b, left:r] = 255 if code >> bit & 1 else 0
    return frame


def _read_index(frame):
    """The index a decoded frame carries (each block's central half clearly black or white, the check bits
    matching); ValueError for a frame that cannot be read (turned, cropped, another picture)."""
    luma = np.asarray(frame).astype(np.float64).mean(axis=2)
    h, w = luma.shape
    if not _LOW <= luma[: max(1, h // 16)].mean() <= _HIGH:
        raise ValueError(f"unreadable index frame {w}x{h}: its top margin is not mid-grey")
    code = 0
    for bit, (t, b, left, r) in enumerate(_cells(h, w)):
        dy, dx = (b - t) // 4, (r - left) // 4
        v = luma[t + dy : b - dy, left + dx : r - dx].mean()
        if _LOW <= v <= _HIGH:
            raise ValueError(f"unreadable index frame {w}x{h}: block {bit} averages {v:.1f}")
        code |= int(v > _HIGH) << bit
    index = code & 0xFFFF
    if code >> 16 != _check(index):
        raise ValueError(f"unreadable index frame {w}x{h}: check bits {code >> 16:04b} do not match index {index} "
                         "(a rotated, mirrored or damaged frame)")
    return index


def _pts(clip):
    """Presentation times in 90 kHz ticks: frame i at round(i / rate), each moved by up to 0.3 of a frame interval
    (seeded, the first kept at 0) for a variable-frame-rate clip."""
    step = 90000 / Fraction(*clip["rate"])
    even = np.array([round(i * step) for i in range(clip["frames"])], dtype=np.int64)
    if not clip["vfr"]:
        return [int(v) for v in even]
    reach = int(0.3 * step)
    moved = even + np.random.default_rng(clip["vfr_seed"]).integers(-reach, reach + 1, clip["frames"])
    moved[0] = 0
    return [int(v) for v in moved]


def _make_clip(clip):
    """The clip's bytes, encoded here by PyAV: H.264 in MP4 or VP9 in WebM at yuv420p (odd sides one pixel
    smaller), the MPEG 90 kHz time base, the rotation as the stream's display matrix."""
    width, height = clip["width"] - clip["width"] % 2, clip["height"] - clip["height"] % 2
    buf = io.BytesIO()
    with av.open(buf, "w", format=clip["container"]) as out:
        codec = {"mp4": "libx264", "webm": "libvpx-vp9"}[clip["container"]]
        stream = out.add_stream(codec, rate=Fraction(*clip["rate"]))
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.time_base = Fraction(1, 90000)
        stream.codec_context.time_base = stream.time_base
        if clip["rotation"]:
            stream.set_display_rotation(clip["rotation"])
        for i, pts in enumerate(_pts(clip)):
            frame = av.VideoFrame.from_ndarray(_index_frame(height, width, i), format="rgb24")
            frame.pts, frame.time_base = pts, stream.time_base
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
    return buf.getvalue()


_CLIP_FILES = tempfile.TemporaryDirectory(prefix="deferlab-repro-")  # removed when the script ends


def _file(data, suffix):
    """The clip as the file a client names, in the script's own folder."""
    path = os.path.join(_CLIP_FILES.name, f"clip{len(os.listdir(_CLIP_FILES.name))}" + suffix)
    with open(path, "wb") as f:
        f.write(data)
    return path


def _short(indices):
    """A list of frame indices as it prints: the first 12 and the last 4 of a longer one."""
    if len(indices) <= 16:
        return str(indices)
    return str(indices[:12])[:-1] + ", ..., " + str(indices[-4:])[1:]


def _answer(side):
    """A side's answer, or its refusal as one line (a loader refusing the clip is an answer)."""
    try:
        return side()
    except Exception as e:
        return f"refused ({type(e).__name__}: {(str(e).splitlines() or [''])[0]})"


def _trained_frames(data, container):
    """transformers' load_video (its default backend, PyAV) on the clip as a file, sampling with the checkpoint's
    video processor's own sample_frames where it samples (its config, or fps / num_frames named by the request),
    every other kwarg from the processor's attributes, as BaseVideoProcessor.preprocess fills them (semantics
    §20.4); otherwise every frame."""
    proc = getattr(transformers, PROCESSOR).from_dict(dict(VIDEO_CONFIG))
    given = {k: v for k, v in OPTIONS.items() if k in ("fps", "num_frames")}
    sample = None
    if proc.do_sample_frames or given:
        kw = {name: given.get(name, getattr(proc, name, None)) for name in proc.valid_kwargs.__annotations__}
        for name in ("input_data_format", "do_convert_rgb", "do_sample_frames", "device", "video_metadata"):
            kw.pop(name, None)
        sample = partial(proc.sample_frames, **kw)
    frames, _ = load_video(_file(data, "." + container), backend="pyav", sample_indices_fn=sample)
    return np.asarray(frames)


def _served_frames(data, container, monkeypatch):
    """LMDeploy's own load_from_url on the clip as a client sends it (a data:video/...;base64 URI), with
    VideoMediaIO(image_io=ImageMediaIO(), **media_io_kwargs['video']) as its server builds it (the backend it picks:
    OpenCV in a normal install); its processor keeps the frames as taken (semantics §20.7)."""
    url = f"data:video/{container};base64," + base64.b64encode(data).decode("ascii")
    kwargs = {k: v for k, v in OPTIONS.items() if k in ("fps", "num_frames")}
    frames, _ = load_from_url(url, VideoMediaIO(image_io=ImageMediaIO(), **kwargs))
    return np.asarray(frames.numpy() if hasattr(frames, "numpy") else frames)


@pytest.mark.parametrize("kind", list(KINDS))
def test_c19_video_frames_and_pixels_equal_the_checkpoints(kind, monkeypatch):
    """The frames LMDeploy's video loader takes from the clip (read back
    from their pixels, in order) are the checkpoint's, and each is within one uint8 level of the checkpoint's
    decode of it (semantics §20.2, C19); a refusal on one side only is a difference, on both agreement."""
    clip = KINDS[kind]
    data = _make_clip(clip)
    served = _answer(lambda: _served_frames(data, clip["container"], monkeypatch))
    trained = _answer(lambda: _trained_frames(data, clip["container"]))
    if isinstance(served, str) and isinstance(trained, str):
        return  # both sides refuse the clip: they agree
    assert not isinstance(served, str), f"the served side refused what the trained side takes: {served}"
    assert not isinstance(trained, str), f"the served side took what the trained side refuses: {trained}"
    got = _answer(lambda: [_read_index(f) for f in served])
    want = _answer(lambda: [_read_index(f) for f in trained])
    assert not isinstance(got, str), f"a served frame's index cannot be read back: {got}"
    assert not isinstance(want, str), f"a trained frame's index cannot be read back: {want}"
    assert got == want, f"frames taken (read back) {len(got)} {_short(got)} != the checkpoint's {len(want)} {_short(want)}"
    for k, (a, b) in enumerate(zip(served, trained)):
        sizes = (a.shape[1], a.shape[0], b.shape[1], b.shape[0])
        assert a.shape == b.shape, "frame %d (source %d) is %dx%d, the checkpoint's %dx%d" % (k, got[k], *sizes)
        gap = np.abs(a.astype(np.int16) - b.astype(np.int16))
        off = int((gap > 1).sum())
        assert not off, f"frame {k} (source {got[k]}): {off} of {gap.size} values more than 1 level off"
