"""The reproducer texts of GLM-4.1V's video claims (C16, C17, C18; semantics §20.4 and §20.6), joined by
`reports.repro.video` with the shared answers and tests (`reports.repro.video_texts`, `video_served_texts`).

Why GLM's own texts: its trained side is not the Qwen ones'. ``Glm4vVideoProcessor.sample_frames`` reads the
clip's duration (transformers' loaders set it to frames / fps), evens the count itself by repeating the last index,
and the times the model is told are the whole seconds ``Glm4vProcessor.replace_video_token`` writes after each
frame, read here off the text it builds. vLLM's side differs where the scripts show it: its ``opencv_dynamic``
loader chooses (and may choose nothing, which its OpenCV codec refuses), the processor gets the frames read with
the loader's ``do_sample_frames`` through ``Glm4vProcessor``'s own kwargs routing, and the times are vLLM's own
``Glm4vProcessingInfo._construct_video_placeholder``, read off the placeholder it builds. SGLang's (0.5.20 on,
semantics §20.5) parses the client's ``video_url`` fields, merges and clamps them and samples with the processor's
own ``sample_frames`` (``glm_sample_and_decode_sync``, on a stand-in reader of the clip's metadata), then hands the
frames over with ``do_sample_frames=False``; an older release's script skips (transformers samples the raw request
there). The scripts call each of those; nothing here is an engine's or transformers' code.
"""

from deferlab.reports.repro import video_served_texts, video_texts

# after transformers: the processor wrapper whose kwargs routing and prompt text the scripts run
IMPORTS = """from transformers.models.glm4v.processing_glm4v import Glm4vProcessor
"""

PROCESSOR_TEXT = '''

def _processor():
    """The checkpoint's video processor, built by from_dict from its video config as from_pretrained builds it."""
    return getattr(transformers, PROCESSOR).from_dict(dict(VIDEO_CONFIG))
'''

TRAINED = (
    PROCESSOR_TEXT
    + '''

def _trained_metadata():
    """The clip's metadata as transformers' video loaders set it: GLM's sampler reads the duration, frames / fps."""
    fps = FPS if FPS > 0 else None
    return VideoMetadata(total_num_frames=FRAMES, fps=fps, width=WIDTH, height=HEIGHT,
                         duration=FRAMES / fps if fps else 0.0)


def _given():
    """The request's sampling options as the processor takes them: fps; num_frames falls into sample_frames'
    **kwargs (semantics §20.4)."""
    return {k: v for k, v in OPTIONS.items() if k in ("fps", "num_frames")}


def _trained_indices():
    """GLM's sample_frames on the clip, its kwargs filled as preprocess fills them; its list already holds the
    repeated last index of an odd count."""
    return _sample(_processor(), _trained_metadata(), _given())


def _trained_run():
    """(grid, the frames' indices, metadata) of the checkpoint's processor on the whole clip (black frames of its
    size), sampling as its config says, min / max pixels as its size's edges."""
    frames = np.zeros((FRAMES, HEIGHT, WIDTH, 3), np.uint8)
    size = dict(_processor().size)
    size.update({e: OPTIONS[k] for k, e in (("min_pixels", "shortest_edge"), ("max_pixels", "longest_edge"))
                 if k in OPTIONS})
    out = _processor()(videos=[frames], video_metadata=[_trained_metadata()], size=size, return_metadata=True,
                       return_tensors="pt", **_given())
    return out["video_grid_thw"], [int(i) for i in out["video_metadata"][0].frames_indices], out["video_metadata"]


def _trained_geometry():
    """(grid, temporal padding) of the checkpoint's processor: patchify's padding of the frames it sampled."""
    grid, indices, _ = _trained_run()
    grid = [int(v) for v in grid[0]]
    return grid, grid[0] * int(VIDEO_CONFIG["temporal_patch_size"]) - len(indices)


def _prompt_times(grid, metadata):
    """The seconds Glm4vProcessor.replace_video_token writes after each frame of the prompt, on a processor
    output's grid and metadata (no tokenizer: the wrapper carries only what that method reads)."""
    outer = Glm4vProcessor.__new__(Glm4vProcessor)
    outer.video_processor, outer.image_token = _processor(), "<image>"
    text = outer.replace_video_token({"video_grid_thw": grid, "video_metadata": metadata}, 0)
    return [float(s) for s in re.findall(r"<\\|end_of_image\\|>(-?\\d+)", text)]


def _trained_times():
    """The checkpoint's prompt times for its own frames (`_prompt_times` of its processor's output)."""
    grid, _, metadata = _trained_run()
    return _prompt_times(grid, metadata)
'''
)

VLLM_SERVED = '''

def _read(monkeypatch):
    """vLLM's loader on the clip (`_loaded`); where its loader chose no frame, the release's own OpenCV
    read_frames on that empty choice (what its codec runs next, and refuses)."""
    loaded = _loaded(monkeypatch)
    if not loaded["frames_indices"]:
        vllm_video.VideoLoader.read_frames(None, [], FRAMES)
    return loaded


def _routed(**flat):
    """The video kwargs Glm4vProcessor's own routing (ProcessorMixin._merge_kwargs) makes of the kwargs vLLM
    hands it flat: the request's min / max pixels (mm_processor_kwargs) and the loader's do_sample_frames."""
    outer = Glm4vProcessor.__new__(Glm4vProcessor)
    outer.video_processor, outer.image_processor, outer.tokenizer = _processor(), None, None
    kwargs = outer._merge_kwargs(Glm4vProcessor.valid_processor_kwargs, tokenizer_init_kwargs=None, **flat)
    return kwargs["videos_kwargs"]


def _handoff(monkeypatch):
    """(the loader's dict, grid, the source frames the processor keeps) as vLLM's GLM-4.1V processing calls the
    checkpoint's processor: on the frames its loader read (black, the clip's size), with the loader's metadata
    and do_sample_frames = the loader's flag, True where it read every frame (the processor then samples again,
    at its own fps: the request's fps went to the loader)."""
    loaded = _read(monkeypatch)
    read = [int(i) for i in loaded["frames_indices"]]
    meta = VideoMetadata(**{k: v for k, v in loaded.items() if k != "do_sample_frames"})
    pixels = {k: v for k, v in OPTIONS.items() if k in ("min_pixels", "max_pixels")}
    kwargs = {**_routed(do_sample_frames=bool(loaded["do_sample_frames"]), **pixels), "return_metadata": True}
    frames = np.zeros((len(read), HEIGHT, WIDTH, 3), np.uint8)
    out = _processor()(videos=[frames], video_metadata=[meta], return_tensors="pt", **kwargs)
    kept = [int(i) for i in out["video_metadata"][0].frames_indices]
    taken = [read[i] for i in kept] if loaded["do_sample_frames"] else read
    return loaded, out["video_grid_thw"][0], taken


def _served_indices(monkeypatch):
    """vLLM's frames: those the processor keeps of the frames its loader read."""
    return _handoff(monkeypatch)[2]


def _served_geometry(monkeypatch):
    """(grid, temporal padding) of the processor as vLLM calls it (`_handoff`)."""
    _, grid, taken = _handoff(monkeypatch)
    grid = [int(v) for v in grid]
    return grid, grid[0] * int(VIDEO_CONFIG["temporal_patch_size"]) - len(taken)


class _Words:
    """A tokenizer that keeps each text whole, so the placeholder shows the times vLLM writes."""

    def encode(self, text, add_special_tokens=False):
        return [text]


def _served_times(monkeypatch):
    """The seconds vLLM writes after each frame: the release's own Glm4vProcessingInfo
    ._construct_video_placeholder (its times from _get_video_second_idx_glm4v on the loader's dict; 0.34.0 also
    checks their count against the grid), built with the checkpoint's processors and stand-in token ids that
    keep the text; read off the placeholder after each image end."""
    loaded, grid, _ = _handoff(monkeypatch)
    info = object.__new__(getattr(importlib.import_module(INFO[0]), INFO[1]))
    outer = Glm4vProcessor.__new__(Glm4vProcessor)
    outer.image_processor, outer.image_token_id = _processor(), "<image>"  # merge_size: the checkpoint's 2
    config = SimpleNamespace(video_start_token_id="<video>", video_end_token_id="</video>",
                             image_start_token_id="<begin>", image_end_token_id="<end>")
    info.get_video_processor = lambda **_: _processor()
    info.get_hf_processor = lambda **_: outer
    info.get_tokenizer = lambda **_: _Words()
    info.get_hf_config = lambda **_: config
    frames = np.zeros((len(loaded["frames_indices"]), 1, 1, 3), np.uint8)  # the loader's frames: their count
    placeholder = info._construct_video_placeholder(frames, dict(loaded), torch.as_tensor(grid))
    return [float(placeholder[i + 1]) for i, token in enumerate(placeholder) if token == "<end>"]
'''

SGLANG_CONFIG = '''

def _video_config():
    """The per-video config SGLang's GLM processor builds (process_mm_data_async: its own functions, in its order):
    the client's video_url part with the request's fields through SGLang's own template step (which keeps the
    fields it reads), merged over the processor's defaults (the server's --mm-process-config video dict empty),
    and its token budget."""
    part = {"type": "video_url", "video_url": {"url": "clip.mp4", **VIDEO_URL_FIELDS}}
    video_data = []
    jinja.process_content_for_template_format({"role": "user", "content": [part]}, "openai", [], video_data, [], [])
    _, configs = glm4v.split_glm_video_items(video_data)
    configs = glm4v._merge_glm_video_configs(glm4v.glm_processor_video_config(_processor()), configs)
    tokens = glm4v.glm_max_image_tokens_from_configs(configs)
    budget = glm4v.glm_budget_kwargs(_processor(), user_max_image_tokens=tokens, count=1, split=True)
    return glm4v._glm_effective_presize_budget(configs[0], (budget or {}).get("max_image_tokens"))
'''

_SGLANG_HANDOFF = '''

def _handoff():
    """(the processor's output, SGLang's indices): SGLang's glm_sample_and_decode_sync on the clip's reader with
    that config (it samples with the processor's own sample_frames and fetches the frames), then the processor on
    those frames with SGLang's metadata and do_sample_frames=False, as its processor hands them over."""
    if not hasattr(glm4v, "glm_sample_and_decode_sync"):  # before 0.5.20 transformers samples the raw request
        pytest.skip("this release hands GLM-4.1V videos to transformers whole: not the path this script calls")
    frames, metadata = glm4v.glm_sample_and_decode_sync(ClipReader(), _video_config(), _processor())
    out = _processor()(videos=[frames], video_metadata=[metadata], do_sample_frames=False, return_metadata=True,
                       return_tensors="pt")
    return out, [int(i) for i in metadata["frames_indices"]]


def _served_indices(monkeypatch):
    """SGLang's frames: those it sampled and fetched."""
    return _handoff()[1]


def _served_geometry(monkeypatch):
    """(grid, temporal padding) of the processor on SGLang's frames."""
    out, indices = _handoff()
    grid = [int(v) for v in out["video_grid_thw"][0]]
    return grid, grid[0] * int(VIDEO_CONFIG["temporal_patch_size"]) - len(indices)


def _served_times(monkeypatch):
    """The seconds Glm4vProcessor.replace_video_token writes after each frame, on the grid and the metadata of
    SGLang's hand-over."""
    out, _ = _handoff()
    return _prompt_times(out["video_grid_thw"], out["video_metadata"])
'''
SGLANG_SERVED = SGLANG_CONFIG + _SGLANG_HANDOFF
_SGLANG_ENGINE = """import numpy as np
import pytest
import torch
from sglang.srt.multimodal.processors import glm4v
from sglang.srt.parser import jinja_template_utils as jinja
from sglang.srt.utils.video_decoder import VideoDecoderWrapper
"""

_VLLM_ENGINE = video_texts.VLLM_VIDEO_IMPORTS[1].replace("import numpy as np\n", "import numpy as np\nimport torch\n")
# engine -> ((stdlib imports, the engine's imports), the script's functions); claim -> its test; engine -> the
# constants of its part (`CONSTANTS` of its repro_video module) the functions read
_COMMON = video_texts.VIDEO_ANSWER + TRAINED
VIDEO = {
    "vllm": (
        ("import importlib\nimport re\nfrom types import SimpleNamespace\n", _VLLM_ENGINE),
        _COMMON + video_texts.VLLM_LOADED + VLLM_SERVED,
    ),
    "sglang": (("import re\n", _SGLANG_ENGINE), _COMMON + video_texts.SGLANG_READER + SGLANG_SERVED),
}
TESTS = {"C16": video_texts.VIDEO_C16_TEST, "C17": video_texts.GEOMETRY_TEST, "C18": video_served_texts.TIMES_TEST}
NAMES = {"vllm": ("INFO",), "sglang": ()}
