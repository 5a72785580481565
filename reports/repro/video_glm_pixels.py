"""GLM-4.1V's C19 reproducer (video pixels, semantics §20.2, §20.4-§20.6): the clip kinds `reports.repro
.video_pixels` fits and states, with GLM's own trained decode and each engine's GLM loader.

Why its own texts: GLM's sampler repeats the last index of an odd count, and transformers' PyAV reader keeps a
repeated index once, so the checkpoint's frames are restored one per index as its processor's default loader
(torchcodec's ``get_frames_at``) returns them (§20.4). vLLM's GLM loader (``opencv_dynamic`` through its own
``MediaConnector.fetch_video``) keeps the sorted set of its choice, its processor samples a clip read whole again,
and patchify repeats an odd count's last frame (§20.6); SGLang (0.5.20 on) decodes with its own ``load_video`` and
samples and fetches in ``glm_sample_and_decode_sync`` under the config its GLM processor builds (§20.5). The
clip, the index code and the test are C19's shared texts (`reports.repro.video_pixels_texts`).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType
from typing import Any

from deferlab.reports.repro import video_glm_texts as glm
from deferlab.reports.repro import video_pixels
from deferlab.reports.repro import video_pixels_texts as texts

_MARK = "\n\ndef _trained_frames("
_HELPERS, _FOUND, _ = texts.COMMON.partition(_MARK)  # the clip, index and answer helpers; the Qwen decode follows
if not _FOUND:  # the shared text changed shape: say so at import, not in a script
    raise RuntimeError(f"reports.repro.video_pixels_texts.COMMON no longer holds {_MARK.strip()!r}")

TRAINED = '''

def _trained_frames(data, container):
    """transformers' load_video (PyAV) on the clip as a file with GLM's own sample_frames, its kwargs filled as
    BaseVideoProcessor.preprocess fills them (num_frames falls into its **kwargs). PyAV keeps a repeated index
    once: the sampler's repeated last index is restored, one frame per index, as the processor's default loader
    (torchcodec's get_frames_at) returns them (semantics §20.4)."""
    proc = getattr(transformers, PROCESSOR).from_dict(dict(VIDEO_CONFIG))
    given = {k: v for k, v in OPTIONS.items() if k in ("fps", "num_frames")}
    kw = {name: given.get(name, getattr(proc, name, None)) for name in proc.valid_kwargs.__annotations__}
    for name in ("input_data_format", "do_convert_rgb", "do_sample_frames", "device", "video_metadata"):
        kw.pop(name, None)
    frames, meta = load_video(_file(data, "." + container), backend="pyav",
                              sample_indices_fn=partial(proc.sample_frames, **kw))
    frames, indices = np.asarray(frames), [int(i) for i in meta.frames_indices]
    if len(frames) == len(indices):
        return frames
    read = sorted(set(indices))
    return frames[[read.index(i) for i in indices]]
'''

VLLM = '''

def _served_frames(data, container, monkeypatch):
    """vLLM's own MediaConnector.fetch_video on the clip as a file: URL under --allowed-local-media-path, with the
    request's media_io_kwargs['video'] and the loader vLLM picks for the checkpoint's processor class
    (opencv_dynamic, its OpenCV codec); the processor samples a clip read whole again with its own sample_frames
    (vLLM hands it the loader's do_sample_frames), and patchify repeats an odd count's last frame: the frames the
    encoder gets (semantics §20.6)."""
    path = _file(data, ".video")
    connector = MediaConnector(media_io_kwargs={"video": dict(MEDIA_IO_KWARGS)},
                               allowed_local_media_path=os.path.dirname(path))
    frames, metadata = connector.fetch_video(pathlib.Path(path).as_uri(), video_processor=PROCESSOR).media
    frames = np.asarray(frames)
    if metadata["do_sample_frames"]:
        proc = getattr(transformers, PROCESSOR).from_dict(dict(VIDEO_CONFIG))
        meta = VideoMetadata(**{k: v for k, v in metadata.items() if k != "do_sample_frames"})
        frames = frames[[int(i) for i in proc.sample_frames(meta)]]
    pad = -len(frames) % int(VIDEO_CONFIG["temporal_patch_size"])
    return np.concatenate([frames, np.repeat(frames[-1:], pad, axis=0)])
'''

SGLANG_IMPORTS = """
from sglang.srt.multimodal.processors import glm4v
from sglang.srt.parser import jinja_template_utils as jinja
from sglang.srt.utils import common
"""

SGLANG = '''

def _served_frames(data, container, monkeypatch):
    """SGLang's own load_video on the clip as a file (its decoder: torchcodec, else decord), then
    glm_sample_and_decode_sync with the config its GLM processor builds (`_video_config`): the frames it fetched
    (semantics §20.5). is_cpu answers True: no pin_memory without CUDA."""
    if not hasattr(glm4v, "glm_sample_and_decode_sync"):  # before 0.5.20 transformers decodes the raw request
        pytest.skip("this release hands GLM-4.1V videos to transformers whole: not the path this script calls")
    monkeypatch.setattr(common, "is_cpu", lambda: True)  # what the decoder wrapper's _is_cpu_engine reads
    reader = common.load_video(_file(data, ".mp4"), use_gpu=False)
    try:
        frames, _ = glm4v.glm_sample_and_decode_sync(reader, _video_config(), _processor())
    finally:
        reader.close()
    return np.asarray(frames.cpu().numpy())
'''

# engine -> (imports after the clip's, its served frames)
SERVED = {
    "vllm": (texts.VLLM_IMPORTS, VLLM),
    "sglang": (SGLANG_IMPORTS, glm.PROCESSOR_TEXT + glm.SGLANG_CONFIG + SGLANG),
}


def fit(c: Any, part: ModuleType | None, ce: Any, row: Mapping[str, Any] | None = None) -> tuple[str, str, str] | None:
    """(imports, the clip kinds' constants, body) of GLM-4.1V's C19 reproducer, or None where `video_pixels.fit`
    gives none (another counterexample, a family the engine's part does not list, a served path other than the
    default) or the engine has no GLM loader text here."""
    made = video_pixels.fit(c, part, ce, row)
    if made is None or c.engine not in SERVED:
        return None
    imports, served = SERVED[c.engine]
    return "\n" + texts.CLIP_IMPORTS.lstrip("\n") + imports, made[1], _HELPERS + TRAINED + served + texts.C19_TEST
