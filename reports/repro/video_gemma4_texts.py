"""The reproducer texts of Gemma 4's video claims (C16, C17, C18; semantics §20.10), joined by `reports.repro.video`
with the shared answers (`reports.repro.video_texts`).

Why Gemma 4's own texts: its trained side is one processor call with no temporal patch. ``Gemma4VideoProcessor``
samples i x N // 32 (its config's ``num_frames``, filled by ``preprocess`` even beside a client's ``fps``, which it
then refuses), refuses a clip of fewer frames than it asks for, sizes each frame to 70 soft tokens and tells the
model each frame's whole seconds in ``Gemma4Processor.replace_video_token``'s "MM:SS" text, read here off that text.
Neither engine runs that sampler. vLLM's generic opencv loader takes min(32, N) frames by ``np.linspace`` and hands
them to the checkpoint's *image* processor at its ``_VIDEO_MAX_SOFT_TOKENS``; its soft tokens are its own
``Gemma4ProcessingInfo._compute_num_soft_tokens`` and its times index / (the loader's fps or 24), written by its own
``get_video_repl``. SGLang's ``Gemma4SGLangProcessor._video_decoder_to_tensor`` takes every frame of a clip of at
most 32, then hands the frames over with ``do_sample_frames=False`` and no metadata, so the prompt says position /
24 seconds. Nothing here is an engine's or transformers' code: the scripts call it (vLLM's time line is restated).
"""

from deferlab.reports.repro import video_texts

# after transformers: the processor wrapper whose prompt text the scripts read
IMPORTS = """from transformers.models.gemma4.processing_gemma4 import Gemma4Processor
"""

TRAINED = '''

def _processor():
    """The checkpoint's video processor, built by from_dict from its video config as from_pretrained builds it."""
    return getattr(transformers, PROCESSOR).from_dict(dict(VIDEO_CONFIG))


def _given():
    """The request's sampling options as the processor takes them (semantics §20.10(a))."""
    return {k: v for k, v in OPTIONS.items() if k in ("fps", "num_frames")}


def _trained_metadata():
    """The clip's metadata as transformers' video loaders set it (no rate: None)."""
    return VideoMetadata(total_num_frames=FRAMES, fps=FPS if FPS > 0 else None, width=WIDTH, height=HEIGHT)


def _trained_indices():
    """The checkpoint's sample_frames on the clip, its kwargs filled as preprocess fills them (num_frames=32)."""
    return _sample(_processor(), _trained_metadata(), _given())


def _trained_run():
    """The checkpoint's processor on the whole clip (black frames, the clip's size, its metadata), sampling as its
    config says."""
    frames = np.zeros((FRAMES, HEIGHT, WIDTH, 3), np.uint8)
    return _processor()(videos=[frames], video_metadata=[_trained_metadata()], return_metadata=True,
                        return_tensors="pt", **_given())


def _patches(positions):
    """[rows, columns] of real patches in a frame, read off its position ids (x, y; padding is -1)."""
    first = positions.reshape(-1, positions.shape[-2], 2)[0]
    real = first[first[:, 0] >= 0]
    return [int(real[:, 1].max()) + 1, int(real[:, 0].max()) + 1]


def _geometry(out):
    """Frames, patches a frame and soft tokens of a video processor output."""
    frames = out["video_position_ids"].reshape(-1, out["video_position_ids"].shape[-2], 2).shape[0]
    per_frame = int(out["num_soft_tokens_per_video"][0])
    return {"frames": frames, "patches": _patches(out["video_position_ids"]), "soft_tokens": frames * per_frame}


_STAMP = re.compile(r"(\\d+):(\\d+) <boi>")  # "MM:SS <boi>" before each frame's tokens


def _prompt_times(out):
    """The seconds Gemma4Processor.replace_video_token writes before each frame, on a processor output's metadata
    (no tokenizer: the wrapper carries only the three tokens that method reads)."""
    outer = Gemma4Processor.__new__(Gemma4Processor)
    outer.boi_token, outer.eoi_token, outer.video_token = "<boi>", "<eoi>", "<video>"
    inputs = {"num_soft_tokens_per_video": [int(out["num_soft_tokens_per_video"][0])],
              "video_metadata": out["video_metadata"]}
    return [float(int(m) * 60 + int(s)) for m, s in _STAMP.findall(outer.replace_video_token(inputs, 0))]


def _trained_geometry():
    return _geometry(_trained_run())


def _trained_times():
    return _prompt_times(_trained_run())


def _said(answer):
    """A side's answer as the failure states it."""
    if isinstance(answer, str):
        return answer
    if isinstance(answer, list) and len(answer) > 16:
        return f"{len(answer)}: {answer[:12]} ... {answer[-4:]}"
    return f"{answer}"


def _verdict(what, served, trained):
    """The failure: what $served does with the clip, and what the checkpoint's processor does."""
    at = ""
    if isinstance(served, list) and isinstance(trained, list):
        first = next((i for i, (a, b) in enumerate(zip(served, trained)) if a != b), min(len(served), len(trained)))
        both = [x[first] if first < len(x) else "none" for x in (served, trained)]
        at = f" (frame {first}: {both[0]} against the checkpoint's {both[1]})"
    return (f"{what}{at}: $served gives {_said(served)}; the checkpoint's {PROCESSOR} "
            f"{'gives ' if not isinstance(trained, str) else ''}{_said(trained)}")
'''

VLLM_SERVED = '''

def _image_processor():
    """The checkpoint's image processor (its published config), which vLLM runs on the frames of a video."""
    return getattr(transformers, IMAGE_CONFIG["image_processor_type"]).from_dict(dict(IMAGE_CONFIG))


class _Words:
    """A tokenizer that keeps each text whole, so get_video_repl's ids show the text it writes."""

    def encode(self, text, add_special_tokens=False):
        return [text]


def _info():
    """The release's Gemma4ProcessingInfo (only _compute_num_soft_tokens and get_video_repl run): the vision
    config's patch and pooling sizes are the checkpoint's, the three special tokens stand-in strings."""
    image = _image_processor()
    vision = SimpleNamespace(patch_size=image.patch_size, pooling_kernel_size=image.pooling_kernel_size)
    info = object.__new__(getattr(importlib.import_module(INFO[0]), INFO[1]))
    info.get_hf_config = lambda: SimpleNamespace(vision_config=vision, boi_token_id="<boi>", eoi_token_id="<eoi>")
    info.ctx = SimpleNamespace(get_tokenizer=_Words)
    return info


def _soft():
    """The release's per-frame budget for video (_VIDEO_MAX_SOFT_TOKENS, 70)."""
    return int(importlib.import_module(INFO[0])._VIDEO_MAX_SOFT_TOKENS)


def _served_indices(monkeypatch):
    """vLLM's frames: those its loader read; all of them reach the image processor."""
    return [int(i) for i in _loaded(monkeypatch)["frames_indices"]]


def _served_geometry(monkeypatch):
    """As Gemma4MultiModalProcessor._apply_hf_processor_main handles a video: the frames its loader read (black,
    the clip's size, as PIL images) through the checkpoint's image processor at the release's max_soft_tokens,
    and each frame's soft tokens from the release's _compute_num_soft_tokens."""
    frames = [Image.new("RGB", (WIDTH, HEIGHT)) for _ in _loaded(monkeypatch)["frames_indices"]]
    out = _image_processor()(images=frames, max_soft_tokens=_soft(), return_tensors="pt")
    info = _info()
    tokens = [info._compute_num_soft_tokens(f.size[0], f.size[1], max_soft_tokens=_soft()) for f in frames]
    return {"frames": len(frames), "patches": _patches(out["image_position_ids"]), "soft_tokens": sum(tokens)}


def _served_times(monkeypatch):
    """The seconds vLLM writes before each frame: index / (the loader's fps, 24 when it has none), one line of
    _apply_hf_processor_main restated here, written as "MM:SS" by the release's own get_video_repl."""
    loaded = _loaded(monkeypatch)
    fps = loaded.get("fps") or 24
    stamps = [i / fps for i in loaded["frames_indices"]]
    repl = _info().get_video_repl(timestamps=stamps, num_soft_tokens_per_frame=[1] * len(stamps),
                                  processor=SimpleNamespace(video_token_id="<video>"))
    return [float(int(m) * 60 + int(s)) for m, s in _STAMP.findall("".join(t for t in repl.full if t != "<video>"))]
'''

SGLANG_SERVED = (
    video_texts.sglang_reader(
        "size from get_frames_at (the fetch Gemma 4's processor calls); records the indices asked for. No decoder.",
        "get_frames_at",
        "np.zeros((len(self.asked), HEIGHT, WIDTH, 3), np.uint8)",
    )
    + '''

def _handoff():
    """(the processor's output, SGLang's indices): the release's own Gemma4SGLangProcessor._video_decoder_to_tensor
    on the clip's reader (it reads only _processor.video_processor.num_frames of its processor), then the
    checkpoint's processor on those frames as process_mm_data hands them over: do_sample_frames=False, no
    video_metadata, the server's --mm-process-config video dict as its kwargs."""
    reader = ClipReader()
    owner = SimpleNamespace(_processor=SimpleNamespace(video_processor=_processor()))
    video = gemma4.Gemma4SGLangProcessor._video_decoder_to_tensor(owner, reader)
    out = _processor()(videos=[video], do_sample_frames=False, return_metadata=True, return_tensors="pt",
                       **SERVER_VIDEO_CONFIG)
    return out, reader.asked


def _served_indices(monkeypatch):
    return _handoff()[1]


def _served_geometry(monkeypatch):
    return _geometry(_handoff()[0])


def _served_times(monkeypatch):
    """replace_video_token's seconds on the metadata the processor built itself (no rate: 24 per position)."""
    return _prompt_times(_handoff()[0])
'''
)

C16_TEST = '''

def test_${cid}_video_frames_taken_equal_the_checkpoints(monkeypatch):
    """The source frames $served takes for the clip (indices in order) equal those the checkpoint's video
    processor samples (semantics §20.2, C16); a refusal on one side only is a difference, on both agreement."""
    served = _answer(lambda: _served_indices(monkeypatch))
    trained = _answer(_trained_indices)
    if isinstance(served, str) and isinstance(trained, str):
        return  # both sides refuse the request: they agree
    assert served == trained, _verdict("frames taken", served, trained)
'''

C17_TEST = '''

def test_${cid}_video_geometry_equals_the_checkpoints(monkeypatch):
    """The frames, the real patches a frame (its size / 16) and the soft tokens the prompt gets equal the
    checkpoint's (semantics §20.2, C17; no temporal patch, so no padding); a refusal on one side only is a
    difference, on both agreement."""
    served = _answer(lambda: _served_geometry(monkeypatch))
    trained = _answer(_trained_geometry)
    if isinstance(served, str) and isinstance(trained, str):
        return
    assert served == trained, _verdict("geometry", served, trained)
'''

C18_TEST = '''

def test_${cid}_video_times_equal_the_checkpoints(monkeypatch):
    """The whole seconds the prompt states before each frame ("MM:SS") equal the checkpoint's (semantics §20.2,
    C18); a refusal on one side only is a difference, on both agreement."""
    served = _answer(lambda: _served_times(monkeypatch))
    trained = _answer(_trained_times)
    if isinstance(served, str) and isinstance(trained, str):
        return
    assert served == trained, _verdict("times (s)", served, trained)
'''

_VLLM_ENGINE = video_texts.VLLM_VIDEO_IMPORTS[1] + "from PIL import Image\n"
_SGLANG_ENGINE = """import numpy as np
from sglang.srt.multimodal.processors import gemma4
from sglang.srt.utils.video_decoder import VideoDecoderWrapper
"""
_COMMON = video_texts.VIDEO_ANSWER + TRAINED
# engine -> ((stdlib imports, the engine's imports), the script's functions); claim -> its test; engine -> the
# constants of its part (`CONSTANTS` of its repro_video module) the functions read
VIDEO = {
    "vllm": (
        ("import importlib\nimport re\nfrom types import SimpleNamespace\n", _VLLM_ENGINE),
        _COMMON + video_texts.VLLM_LOADED + VLLM_SERVED,
    ),
    "sglang": (("import re\nfrom types import SimpleNamespace\n", _SGLANG_ENGINE), _COMMON + SGLANG_SERVED),
}
TESTS = {"C16": C16_TEST, "C17": C17_TEST, "C18": C18_TEST}
NAMES = {"vllm": ("INFO", "IMAGE_CONFIG"), "sglang": ()}
# the request's options the trained side takes no kwarg for (TRAINED Unsupported, semantics §20.10(a)): no script
NO_OPTIONS = ("min_pixels", "max_pixels", "total_pixels")
