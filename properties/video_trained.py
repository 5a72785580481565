"""The video trained sides of Qwen2.5-VL and Qwen3-VL as `reference.system.video.VideoPath`s (semantics §20.1, §20.4).

Why run them: C16-C18 judge every engine against the trained side, so the trained side must be the real code,
not deferlab's reading of it; deferlab's reading (`reference.oracle.video`, the ORACLE row) is itself checked
against these on the whole grid. Two rows per family:

* ``TRAINED``: transformers 5.24.0's ``Qwen2VLVideoProcessor`` / ``Qwen3VLVideoProcessor`` built by ``from_dict``
  from the checkpoint's video config (`VIDEO_CONFIGS`), as ``from_pretrained`` builds it.
* ``CARD``: the model card's recipe, qwen-vl-utils 0.0.14's ``fetch_video``, then the processor on its frames.

``plan`` decodes nothing: it hands the real sampling functions a ``VideoMetadata`` (TRAINED) or a stand-in
``decord`` reader of the clip's count and rate whose ``get_batch`` returns frames without channels (CARD), and
records the target of ``fetch_video``'s resize instead of resizing; ``tests/reference/test_video_oracle.py``
runs the processors on real frames to confirm the glue. The processors and qwen-vl-utils import torchvision:
it is the loader's companion, made importable as `impl.transformers_tv` does.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import tempfile
import threading
import types
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from deferlab.impl.loader.provenance import Records
from deferlab.reference.oracle import video as oracle
from deferlab.reference.system.requests import VIDEO_CONFIGS
from deferlab.reference.system.video import Clip, DecodedVideo, Refused, Unsupported, VideoPlan, VideoRequest

FAMILIES = ("qwen2.5-vl", "qwen3-vl", "glm-4.1v", "gemma4")

_MODULES = {
    "gemma4": ("transformers.models.gemma4.video_processing_gemma4", "Gemma4VideoProcessor"),
    "glm-4.1v": ("transformers.models.glm4v.video_processing_glm4v", "Glm4vVideoProcessor"),
    "qwen2.5-vl": ("transformers.models.qwen2_vl.video_processing_qwen2_vl", "Qwen2VLVideoProcessor"),
    "qwen3-vl": ("transformers.models.qwen3_vl.video_processing_qwen3_vl", "Qwen3VLVideoProcessor"),
}
VP = "qwen_vl_utils.vision_process"
_FAILURES = (ValueError, AssertionError, ZeroDivisionError, TypeError, IndexError)
_LOCK = threading.Lock()
_RECORDS = Records()


def _check(family: str) -> None:
    if family not in FAMILIES:
        raise Unsupported(f"no video trained side for family {family!r}; accepted: {', '.join(FAMILIES)}")


def _one_line(e: BaseException) -> str:
    return f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]}"


def _torchvision() -> None:
    """torchvision importable through the loader's companion (semantics §18.2); `Unsupported` when it cannot be."""
    from deferlab.impl import transformers_tv

    try:
        transformers_tv.provide_torchvision(_RECORDS)
    except transformers_tv.Unavailable as e:
        raise Unsupported(str(e)) from e


def processor(family: str) -> Any:
    """The family's video processor, transformers 5.24.0, built from `VIDEO_CONFIGS` (``cap_pixels_per_frame``
    unset: 5.24.0 takes it as False)."""
    _check(family)
    _torchvision()
    module, name = _MODULES[family]
    return getattr(importlib.import_module(module), name).from_dict(dict(VIDEO_CONFIGS[family][0]))


def _size(proc: Any, request: VideoRequest) -> dict[str, int]:
    low, high = request.min_pixels, request.max_pixels
    return {"shortest_edge": proc.size["shortest_edge"] if low is None else low,
            "longest_edge": proc.size["longest_edge"] if high is None else high}  # fmt: skip


def _finish(family: str, proc: Any, idx: list[int], size: tuple[int, int], times: tuple[float, ...]) -> VideoPlan:
    """Padding and grid as ``patchify`` makes them, tokens as ``replace_video_token`` counts them."""
    tps, p, m = int(proc.temporal_patch_size), int(proc.patch_size), int(proc.merge_size)
    h, w = size
    pad = -len(idx) % tps
    grid = ((len(idx) + pad) // tps, h // p, w // p)
    tokens = grid[0] * grid[1] * grid[2] // (m * m)  # replace_video_token: grid product // merge_size**2
    return VideoPlan(tuple(idx) + (idx[-1],) * pad, (w, h), grid, tokens, times, pad)


class TrainedPath:
    """TRAINED: the checkpoint's video processor, transformers 5.24.0 (semantics §20.4)."""

    label, real_code = "TRAINED", True

    def __init__(self, family: str, backend: str = "pyav") -> None:
        self.family, self.proc, self.backend = family, processor(family), backend
        self.module = importlib.import_module(_MODULES[family][0])
        self.system = f"transformers-{importlib.import_module('transformers').__version__}"

    def _options(self, request: VideoRequest) -> tuple[bool, dict[str, Any]]:
        if request.total_pixels is not None:
            raise Unsupported(f"TRAINED {self.family}: the video processor takes no total_pixels (accepted: fps, "
                              "num_frames, min_pixels, max_pixels)")  # fmt: skip
        given = {k: v for k, v in (("fps", request.fps), ("num_frames", request.num_frames)) if v is not None}
        # BaseVideoProcessor.preprocess fills every valid kwarg not given from the processor's own attributes
        # (Qwen3-VL's fps=2 among them) and hands the rest to sample_frames
        kw = {name: given.get(name, getattr(self.proc, name, None)) for name in self.proc.valid_kwargs.__annotations__}
        for name in ("input_data_format", "do_convert_rgb", "do_sample_frames", "device", "video_metadata"):
            kw.pop(name, None)
        return bool(self.proc.do_sample_frames) or bool(given), kw  # apply_chat_template samples for fps/num_frames

    def plan(self, clip: Clip, request: VideoRequest) -> VideoPlan:
        from transformers.video_utils import VideoMetadata

        sample, kw = self._options(request)
        meta = VideoMetadata(clip.frames, clip.fps if clip.fps > 0 else None, clip.width, clip.height)
        size = _size(self.proc, request)
        tps, factor = int(self.proc.temporal_patch_size), int(self.proc.patch_size * self.proc.merge_size)
        try:
            if sample:
                meta.frames_indices = [int(i) for i in self.proc.sample_frames(meta, **kw)]
            idx = meta.frames_indices if sample else list(range(clip.frames))
            if sample and max(idx) >= clip.frames:  # modelled: _decode_and_sample_videos' video[indices] on N frames
                raise IndexError(f"index {max(idx)} is out of bounds for {clip.frames} frames (video[indices])")
            if self.family == "qwen2.5-vl":
                h, w = self.module.smart_resize(
                    clip.height, clip.width, factor, size["shortest_edge"], size["longest_edge"]
                )
                per = tps / meta.sampled_fps  # Qwen2_5_VLProcessor._process_videos
                times = tuple((np.arange(-(-len(idx) // tps)) * per).tolist())  # t * per
            else:
                h, w = self.module.smart_resize(len(idx), clip.height, clip.width, tps, factor,
                                                size["shortest_edge"], size["longest_edge"])  # fmt: skip
                qp = importlib.import_module("transformers.models.qwen3_vl.processing_qwen3_vl").Qwen3VLProcessor
                fps = 24 if meta.fps is None else meta.fps  # replace_video_token's fallback
                times = tuple(qp._calculate_timestamps(None, list(idx), fps, tps))
        except _FAILURES as e:
            raise Refused(f"TRAINED {self.family}: {_one_line(e)}") from e
        return _finish(self.family, self.proc, idx, (h, w), times)

    def decode(self, data: bytes, request: VideoRequest) -> DecodedVideo:
        """transformers' ``load_video`` on the bytes as a file (``backend``: its default "pyav", or another
        installed one, "opencv"), sampling with the processor's own ``sample_frames`` where the processor samples."""
        from transformers.video_utils import load_video

        sample, kw = self._options(request)
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "clip"
            path.write_bytes(data)
            try:
                fn = partial(self.proc.sample_frames, **kw) if sample else None
                frames, meta = load_video(str(path), backend=self.backend, sample_indices_fn=fn)
            except _FAILURES as e:
                raise Refused(f"TRAINED {self.family} load_video: {_one_line(e)}") from e
        idx = tuple(int(i) for i in meta.frames_indices)
        return DecodedVideo(np.asarray(frames), idx, float(meta.fps or 0.0), int(meta.total_num_frames))

    def provenance(self) -> dict[str, str]:
        module, name = _MODULES[self.family]
        return {
            "sampling": f"real: {module}.{name}.sample_frames (do_sample_frames={self.proc.do_sample_frames}; "
            "on for fps/num_frames, as apply_chat_template does), its kwargs filled as preprocess fills them",
            "size": f"real: {module}.smart_resize, called as {name}.resize calls it (cap_pixels_per_frame off)",
            "grid": "modelled: patchify's pad (-n mod tps) and grid, replace_video_token's count (checked on real "
            "frames by tests/reference/test_video_oracle.py)",
            "times": "real: VideoMetadata.sampled_fps / Qwen3VLProcessor._calculate_timestamps; "
            "Qwen2.5's tps / sampled_fps restated from _process_videos",
            "config": VIDEO_CONFIGS[self.family][1],
        }


class _Reader:
    """A stand-in ``decord.VideoReader`` of a clip's count, rate and size; ``get_batch`` returns frames of the
    clip's height and width with no channels (fetch_video reads only their shape before the recorded resize)."""

    shape: tuple[int, int] = (48, 64)
    frames: int = 1
    fps: float = 0.0

    def __init__(self, path: str) -> None:
        pass

    def __len__(self) -> int:
        return _Reader.frames

    def get_avg_fps(self) -> float:
        return _Reader.fps

    def get_batch(self, idx: list[int]) -> Any:
        frames = np.zeros((len(idx), *_Reader.shape, 0), np.uint8)  # no channels: the shape without the bytes
        return types.SimpleNamespace(asnumpy=lambda: frames)


class CardPath:
    """CARD: qwen-vl-utils 0.0.14's ``fetch_video``, then the processor on its frames (semantics §20.4)."""

    label, real_code = "CARD", True

    def __init__(self, family: str) -> None:
        self.family, self.proc = family, processor(family)
        self.vp = importlib.import_module(VP)
        self.module = importlib.import_module(_MODULES[family][0])
        self.system = "qwen-vl-utils-0.0.14"

    def _ele(self, video: str, request: VideoRequest) -> dict[str, Any]:
        ele: dict[str, Any] = {"video": video}
        names = (("fps", "fps"), ("num_frames", "nframes"), ("min_pixels", "min_pixels"),
                 ("max_pixels", "max_pixels"), ("total_pixels", "total_pixels"))  # fmt: skip
        ele.update({card: getattr(request, ours) for ours, card in names if getattr(request, ours) is not None})
        return ele

    @contextlib.contextmanager
    def _pixel_free(self, clip: Clip) -> Any:
        """fetch_video with the stand-in reader (the real ``_read_video_decord`` around it) and its resize recorded."""
        import torch

        seen: dict[str, Any] = {}

        def resize(video: Any, size: list[int], **kw: Any) -> Any:
            seen["size"] = tuple(size)
            if min(size) <= 0:  # torchvision's own refusal, on one channel of one frame
                self.vp.torchvision.transforms.functional.resize(
                    video[:1, :1].new_zeros(1, 1, *video.shape[-2:]), size, **kw
                )
            return torch.zeros(1).expand(video.shape[0], 3, *size)

        def failed(ele: dict[str, Any]) -> Any:
            raise seen.get("error") or RuntimeError("the decord reader failed")

        def decord_reader(ele: dict[str, Any]) -> Any:
            try:
                return self.vp._read_video_decord(ele)
            except Exception as e:
                seen["error"] = e
                raise

        _Reader.shape, _Reader.frames, _Reader.fps = (clip.height, clip.width), clip.frames, clip.fps
        saved = (sys.modules.get("decord"), self.vp.get_video_reader_backend, self.vp.transforms,
                 self.vp.VIDEO_READER_BACKENDS)  # fmt: skip
        with _LOCK:
            sys.modules["decord"] = types.SimpleNamespace(VideoReader=_Reader)  # type: ignore[assignment]
            self.vp.get_video_reader_backend = lambda: "decord"
            self.vp.transforms = types.SimpleNamespace(functional=types.SimpleNamespace(resize=resize))
            self.vp.VIDEO_READER_BACKENDS = {"decord": decord_reader, "torchvision": failed}
            try:
                yield seen
            finally:
                if saved[0] is None:
                    sys.modules.pop("decord", None)
                else:
                    sys.modules["decord"] = saved[0]
                self.vp.get_video_reader_backend, self.vp.transforms, self.vp.VIDEO_READER_BACKENDS = saved[1:]

    def _after(self, idx: list[int], fps: float, size: tuple[int, int]) -> VideoPlan:
        """The processor on the card's frames: Qwen2.5-VL resizes again and reads no metadata; Qwen3-VL
        (``do_resize=False``) reads the card's metadata for its timestamps."""
        from transformers.video_utils import make_batched_metadata

        tps = int(self.proc.temporal_patch_size)
        h, w = size
        if self.family == "qwen2.5-vl":
            size, factor = self.proc.size, int(self.proc.patch_size * self.proc.merge_size)
            h, w = self.module.smart_resize(h, w, factor, size["shortest_edge"], size["longest_edge"])
            meta = make_batched_metadata([np.zeros((len(idx), 2, 2, 3), np.uint8)], None)[0]
            per = tps / meta.sampled_fps
            times = tuple((np.arange(-(-len(idx) // tps)) * per).tolist())  # t * per
        else:
            qp = importlib.import_module("transformers.models.qwen3_vl.processing_qwen3_vl").Qwen3VLProcessor
            times = tuple(qp._calculate_timestamps(None, list(idx), fps, tps))
        return _finish(self.family, self.proc, idx, (h, w), times)

    def plan(self, clip: Clip, request: VideoRequest) -> VideoPlan:
        ele = self._ele("clip.mp4", request)
        with self._pixel_free(clip) as seen:
            try:
                (_, meta), _fps = self.vp.fetch_video(ele, int(self.proc.patch_size), True, True)
            except Exception as e:
                cause = seen.get("error") or e
                raise Refused(f"CARD {self.family}: {_one_line(cause)}") from e
        return self._after([int(i) for i in meta["frames_indices"]], float(meta["fps"]), seen["size"])

    def decode(self, data: bytes, request: VideoRequest) -> DecodedVideo:
        """qwen-vl-utils' own ``fetch_video`` on the bytes as a file (its reader: torchcodec, decord, or
        torchvision's ``read_video``, which torchvision 0.26 removed)."""
        if not (self.vp.is_torchcodec_available() or self.vp.is_decord_available()):
            raise Unsupported("CARD: qwen-vl-utils 0.0.14 reads video with torchcodec or decord (torchvision 0.26 "
                              "removed read_video); neither is installed here: pip install decord")  # fmt: skip
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "clip.mp4"
            path.write_bytes(data)
            try:
                (video, meta), _ = self.vp.fetch_video(
                    self._ele(str(path), request), int(self.proc.patch_size), True, True
                )
            except Exception as e:
                raise Refused(f"CARD {self.family} fetch_video: {_one_line(e)}") from e
        frames = video.round().clamp(0, 255).to(dtype=__import__("torch").uint8).permute(0, 2, 3, 1).numpy()
        idx = tuple(int(i) for i in meta["frames_indices"])
        return DecodedVideo(frames, idx, float(meta["fps"]), int(meta["total_num_frames"]))

    def provenance(self) -> dict[str, str]:
        return {
            "sampling": f"real: {VP}.fetch_video -> _read_video_decord -> smart_nframes, torch.linspace (a stand-in "
            "decord reader of the clip's count and rate)",
            "size": f"real: {VP}.fetch_video's budget and smart_resize (the resize's target recorded, not run)",
            "processor": "real: the processor's smart_resize (Qwen2.5) / do_resize=False (Qwen3); times from "
            "make_batched_metadata's sampled_fps (Qwen2.5, the card's fps list refused by 5.24.0) or "
            "Qwen3VLProcessor._calculate_timestamps",
        }


class OraclePath:
    """ORACLE: `reference.oracle.video`'s restatement of one row (semantics §20.4)."""

    label, system, real_code = "ORACLE", "deferlab", False

    def __init__(self, family: str, row: str = "TRAINED") -> None:
        oracle.family_of(family)
        self.family, self.row = family, row

    def plan(self, clip: Clip, request: VideoRequest) -> VideoPlan:
        return oracle.plan(self.family, self.row, clip, request)

    def decode(self, data: bytes, request: VideoRequest) -> DecodedVideo:
        """Every frame decoded by PyAV (`properties.clips.decode`), the frames the row's plan takes from them as
        the loader hands them to the processor: before its temporal padding (semantics §20.2: the plan's indices
        repeat the last frame of an odd count, which ``load_video`` does not read). A clip the row's processor
        refuses (a one-frame Qwen3-VL clip: ``smart_resize``) is refused here, as the trained side refuses it; so
        is a container that states no frame count (WebM) on the TRAINED row, whose PyAV ``load_video`` samples
        over that count and refuses (semantics §20.4; the CARD row reads with decord, which counts)."""
        from deferlab.properties import clips

        if self.row == "TRAINED" and clips.reported_frames(data) == 0:
            raise Refused(
                f"TRAINED {self.family} load_video (PyAV): the container states no frame count (stream.frames 0), "
                "so the sampler has no frame to take"
            )
        frames, clip = clips.decode(data), clips.clip_of_bytes(data)
        plan = self.plan(clip, request)
        idx = tuple(plan.indices[: len(plan.indices) - plan.padded])
        return DecodedVideo(frames[list(idx)], idx, clip.fps, clip.frames)

    def provenance(self) -> dict[str, str]:
        return {"plan": f"modelled: reference.oracle.video.plan({self.row!r})"}


def model_processor(family: str, video_processor: Any) -> Any:
    """The model's processor class (``Qwen2_5_VLProcessor`` / ``Qwen3VLProcessor``, transformers 5.24.0) around
    ``video_processor``, without a tokenizer: its own ``_process_videos`` (Qwen2.5-VL's ``second_per_grid_ts``) and
    ``replace_video_token`` (Qwen3-VL's timestamp text) run as they are, with placeholder token strings
    (Qwen2.5-VL's ``video_token`` None: no text built). The tests check the times against it (semantics §20.4)."""
    _check(family)
    sub, name = {"qwen2.5-vl": ("qwen2_5_vl", "Qwen2_5_VLProcessor"), "qwen3-vl": ("qwen3_vl", "Qwen3VLProcessor")}[
        family
    ]
    cls = getattr(importlib.import_module(f"transformers.models.{sub}.processing_{sub}"), name)
    outer = cls.__new__(cls)
    outer.video_processor, outer.video_token = video_processor, None if family == "qwen2.5-vl" else "<V>"
    outer.vision_start_token, outer.vision_end_token = "<S>", "<E>"
    return outer


def trained_paths(family: str, backend: str = "pyav") -> dict[str, TrainedPath | CardPath]:
    """``{"TRAINED": ..., "CARD": ...}`` for ``family`` (semantics §20.1; ``backend``: TRAINED's ``load_video``
    backend; GLM-4.1V and Gemma 4: TRAINED only); `Unsupported` for other families."""
    _check(family)
    if family == "gemma4":  # one row, its own plumbing (semantics §20.10(a))
        from deferlab.properties.video_trained_gemma4 import Gemma4TrainedPath

        return {"TRAINED": Gemma4TrainedPath(processor(family), backend)}
    if family in oracle.ONE_ROW:  # one row: the model card runs this processor itself (semantics §20.4)
        from deferlab.properties.video_trained_glm import GlmTrainedPath

        return {"TRAINED": GlmTrainedPath(processor(family), backend)}
    return {"TRAINED": TrainedPath(family, backend), "CARD": CardPath(family)}


def oracle_path(family: str, row: str = "TRAINED") -> OraclePath:
    """deferlab's ORACLE row for ``family``, restating ``row`` (semantics §20.4)."""
    _check(family)
    return OraclePath(family, row)
