"""The reproducer texts of the video geometry and times where the engine computes them by a rule of its own (vLLM's
C17 and C18, SGLang's Qwen2.5-VL C18; semantics §20.5, §20.6), joined by `reports.repro.video` after the engine's
served frames (`reports.repro.video_texts`).

Why apart from the C16 texts: these cells need more of the engine than its sampling. vLLM hands the processor
kwargs its own ``_complete_mm_processor_size_aliases`` (and, for Qwen3-VL, ``_get_vision_size``) makes of the
request's pixel options, and a ``VideoMetadata`` of its loader's dict; its Qwen3-VL timestamps are its own
``_get_video_second_idx``. SGLang hands Qwen2.5-VL's processor no metadata, so ``second_per_grid_ts`` is
transformers' fallback (``make_batched_metadata``, ``sampled_fps``). The scripts call those functions; nothing
here is an engine's or transformers' code.
"""

# --- vLLM: processor kwargs and geometry (C17) ---------------------------------------------------------------------
VLLM_IMPORTS = "import importlib\n"

VLLM_PROCESSOR = '''

def _info():
    """The release's processing-info class of the family (INFO: module, class): vLLM's own size and time rules."""
    return getattr(importlib.import_module(INFO[0]), INFO[1])


def _processor_kwargs():
    """min_pixels / max_pixels as vLLM hands them to the processor (mm_processor_kwargs): completed by the
    release's _complete_mm_processor_size_aliases; Qwen3-VL folds them into size (_get_vision_size over the
    processor's size) and drops the flat keys (semantics §20.6)."""
    given = {k: v for k, v in OPTIONS.items() if k in ("min_pixels", "max_pixels") and v}
    if not given:
        return {}
    kwargs = dict(_info()._complete_mm_processor_size_aliases(given))
    if PROCESSOR == "Qwen3VLVideoProcessor":
        default = getattr(transformers, PROCESSOR).from_dict(dict(VIDEO_CONFIG)).size
        kwargs["size"] = _info()._get_vision_size(kwargs, default_size=default)
        kwargs.pop("min_pixels", None)
        kwargs.pop("max_pixels", None)
    return kwargs


def _metadata(loaded):
    """The VideoMetadata vLLM builds of its loader's dict (do_sample_frames left out)."""
    return VideoMetadata(**{k: v for k, v in loaded.items() if k != "do_sample_frames"})
'''

VLLM_GEOMETRY = '''

def _served_geometry(monkeypatch):
    """(grid, temporal padding) of the processor as vLLM calls it: on the frames its loader read (black, the clip's
    size), with the loader's metadata and vLLM's processor kwargs; Qwen3-VL also with the loader's
    do_sample_frames, so a clip read whole is resampled by the processor (semantics §20.6)."""
    loaded = _loaded(monkeypatch)
    call = _processor_kwargs()
    if PROCESSOR == "Qwen3VLVideoProcessor":
        call["do_sample_frames"] = bool(loaded["do_sample_frames"])
    frames = np.zeros((len(loaded["frames_indices"]), HEIGHT, WIDTH, 3), np.uint8)
    grid = _grid(frames, video_metadata=[_metadata(loaded)], **call)
    return grid, grid[0] * int(VIDEO_CONFIG["temporal_patch_size"]) - len(_served_indices(monkeypatch))
'''

# --- times (C18) where the served rule is the engine's own ---------------------------------------------------------
VLLM_TIMES = '''

def _served_times(monkeypatch):
    """The times vLLM tells the model: Qwen2.5-VL's second_per_grid_ts x t, the processor's temporal_patch_size /
    sampled_fps of the VideoMetadata vLLM hands it (frames read / source count x source fps); Qwen3-VL's vLLM's
    own Qwen3VLProcessingInfo._get_video_second_idx on that metadata (semantics §20.6)."""
    loaded = _loaded(monkeypatch)
    tps = int(VIDEO_CONFIG["temporal_patch_size"])
    if PROCESSOR == "Qwen3VLVideoProcessor":
        proc = getattr(transformers, PROCESSOR).from_dict(dict(VIDEO_CONFIG))
        info = object.__new__(_info())  # only _get_video_second_idx runs: it asks for the video processor
        info.get_video_processor = lambda **_: proc
        call = _processor_kwargs()
        return [float(t) for t in info._get_video_second_idx(
            metadata=_metadata(loaded), do_sample_frames=bool(loaded["do_sample_frames"]),
            sampled_fps=call.get("fps"), sampled_num_frames=call.get("num_frames"))]
    per = tps / _metadata(loaded).sampled_fps
    return [k * per for k in range(-(-len(_served_indices(monkeypatch)) // tps))]
'''

SGLANG_IMPORTS = "from transformers.video_utils import make_batched_metadata\n"

SGLANG_TIMES = '''

def _served_times(monkeypatch):
    """The times SGLang tells the model: Qwen2.5-VL's processor gets its frames with no metadata, so it builds
    its own (make_batched_metadata, fps None) and second_per_grid_ts = temporal_patch_size / sampled_fps, x t of
    its grid; Qwen3-VL's, the processor's timestamps of SGLang's indices at the clip's fps (semantics §20.5)."""
    video, metadata, indices = _preprocess(monkeypatch)
    if PROCESSOR == "Qwen3VLVideoProcessor":
        return _times(indices, FPS)
    tps = int(VIDEO_CONFIG["temporal_patch_size"])
    per = tps / make_batched_metadata([video], video_metadata=None)[0].sampled_fps
    return [k * per for k in range(_grid(video)[0])]
'''

_QWEN_TIMES = '''

def _times(indices, fps):
    """Qwen3VLProcessor's own _calculate_timestamps of the indices at ``fps`` (pairs of the temporal patch
    averaged)."""
    from transformers.models.qwen3_vl.processing_qwen3_vl import Qwen3VLProcessor

    tps = int(VIDEO_CONFIG["temporal_patch_size"])
    return [float(t) for t in Qwen3VLProcessor._calculate_timestamps(None, list(indices), fps, tps)]


def _grid(frames, **kwargs):
    """The checkpoint's video processor run on ``frames``: its video_grid_thw."""
    proc = getattr(transformers, PROCESSOR).from_dict(dict(VIDEO_CONFIG))
    return [int(v) for v in proc(videos=[frames], return_tensors="np", **kwargs)["video_grid_thw"][0]]


def _trained_times():
    """The checkpoint's times for its own frames: Qwen3-VL, its processor's timestamps at the clip's fps (24 when
    unknown, replace_video_token's fallback); Qwen2.5-VL, temporal_patch_size / VideoMetadata.sampled_fps x t
    (Qwen2_5_VLProcessor._process_videos' rule), the metadata holding the indices where the processor sampled
    (semantics §20.4)."""
    indices = _trained_indices()
    if PROCESSOR == "Qwen3VLVideoProcessor":
        return _times(indices, FPS if FPS > 0 else 24)
    tps = int(VIDEO_CONFIG["temporal_patch_size"])
    proc = getattr(transformers, PROCESSOR).from_dict(dict(VIDEO_CONFIG))
    meta = VideoMetadata(total_num_frames=FRAMES, fps=FPS if FPS > 0 else None, width=WIDTH, height=HEIGHT)
    if proc.do_sample_frames or any(k in OPTIONS for k in ("fps", "num_frames")):
        meta.frames_indices = indices
    per = tps / meta.sampled_fps
    return [k * per for k in range(-(-len(indices) // tps))]
'''

TIMES_TEST = '''

def test_${cid}_video_times_equal_the_checkpoints(monkeypatch):
    """The times the model is told each temporal grid step sits at equal the checkpoint's within 1e-6 s (semantics
    §20.2, C18); a refusal on one side only is a difference, on both agreement."""
    served = _answer(lambda: _served_times(monkeypatch))
    trained = _answer(_trained_times)
    if isinstance(served, str) and isinstance(trained, str):
        return
    assert not isinstance(served, str) and not isinstance(trained, str), f"times {served} != {trained}"
    assert len(served) == len(trained), f"{len(served)} times {served} != the checkpoint's {len(trained)} {trained}"
    assert all(abs(a - b) <= 1e-6 for a, b in zip(served, trained)), f"times {served} != {trained}"
'''
TRAINED_TIMES = _QWEN_TIMES + TIMES_TEST
