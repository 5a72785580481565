"""Gemma 4's C19 reproducer (video pixels, semantics §20.2, §20.10): the clip kinds `reports.repro.video_pixels`
fits and states, with each engine's Gemma 4 loader.

Why its own texts only for SGLang: the trained decode is the shared one (transformers' ``load_video`` with PyAV and
the checkpoint's ``sample_frames``, which refuses a clip of fewer than its 32 frames), and vLLM's Gemma 4 frames
are the shared vLLM text's (its own ``MediaConnector.fetch_video``; no loader is registered for
``Gemma4VideoProcessor``, so its generic opencv loader reads, and the frames read are the frames its image processor
gets). SGLang's Gemma 4 processor samples and fetches in its own ``_video_decoder_to_tensor`` (``get_frames_at``),
not in the Qwen path's ``preprocess_video``: its script calls that on the release's own ``load_video`` reader.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType
from typing import Any

from deferlab.reports.repro import video_pixels
from deferlab.reports.repro import video_pixels_texts as texts

SGLANG_IMPORTS = """from types import SimpleNamespace

from sglang.srt.multimodal.processors import gemma4
from sglang.srt.utils import common
"""

SGLANG = '''

def _served_frames(data, container, monkeypatch):
    """SGLang's own load_video on the clip as a file (its decoder: torchcodec, else decord), then its
    Gemma4SGLangProcessor._video_decoder_to_tensor (every frame of a clip of at most the processor's num_frames,
    else arange(0, N, N / 32)), which reads only _processor.video_processor.num_frames of its processor: the frames
    it fetched, (n, H, W, C) again (semantics §20.10(b)). is_cpu answers True: no pin_memory without CUDA."""
    monkeypatch.setattr(common, "is_cpu", lambda: True)  # what the decoder wrapper's _is_cpu_engine reads
    proc = getattr(transformers, PROCESSOR).from_dict(dict(VIDEO_CONFIG))
    owner = SimpleNamespace(_processor=SimpleNamespace(video_processor=proc))
    reader = common.load_video(_file(data, ".mp4"), use_gpu=False)
    try:
        video = gemma4.Gemma4SGLangProcessor._video_decoder_to_tensor(owner, reader)
    finally:
        reader.close()
    return np.asarray(video.permute(0, 2, 3, 1).cpu().numpy())
'''

# engine -> (imports after the clip's, its served frames), where the shared text is not Gemma 4's
SERVED = {"sglang": (SGLANG_IMPORTS, SGLANG)}


def fit(c: Any, part: ModuleType | None, ce: Any, row: Mapping[str, Any] | None = None) -> tuple[str, str, str] | None:
    """(imports, the clip kinds' constants, body) of Gemma 4's C19 reproducer, or None where `video_pixels.fit`
    gives none (another counterexample, a family the engine's part does not list, a served path other than the
    default)."""
    made = video_pixels.fit(c, part, ce, row)
    if made is None or c.engine not in SERVED:
        return made
    imports, served = SERVED[c.engine]
    return "\n" + texts.CLIP_IMPORTS.lstrip("\n") + imports, made[1], texts.COMMON + served + texts.C19_TEST
