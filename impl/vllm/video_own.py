"""What vLLM's video paths of their own module share (GLM-4.1V's `video_glm`, Gemma 4's `video_gemma4`): the
checkpoint folder vLLM reads the processor class from, the loader it picks for it, the request's loader kwargs,
and the frames its ``MediaConnector`` reads from bytes.

Why a base class: those steps are the release's own and the same for every family vLLM serves through its generic
video loaders (``VideoMediaIO``, ``fetch_video`` on a ``file:`` URL); what a family's module holds is what differs
(the processor it hands the frames to, its sizes, tokens and times). The Qwen families share these steps through
`impl.vllm.video`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import threading
from typing import Any, ClassVar

from deferlab.impl.image_bytes import folder as bytes_folder
from deferlab.impl.loader import owned
from deferlab.impl.vllm.sources import Source
from deferlab.reference.system.errors import InputTypeError
from deferlab.reference.system.requests import VIDEO_CONFIGS
from deferlab.reference.system.video import Unsupported, VideoRequest

VIDEO = "vllm.multimodal.video"
MEDIA = "vllm.multimodal.media.video"
CONNECTOR = "vllm.multimodal.media.connector"
PROCESSOR_NAME = "vllm.transformers_utils.processor"
COMPANIONS = ("transformers", "torchvision")
FETCHED = f"real: {CONNECTOR}.MediaConnector.fetch_video (a file: URL, the opencv codec)"


def checkpoint_folder(name: str, files: dict[str, Any]) -> str:
    """The checkpoint ``files`` (file name -> JSON body) in a folder for this process, written once per ``name``
    and removed at exit: vLLM reads the video processor's class from it, as from a downloaded checkpoint."""
    bodies = {file: json.dumps(body, sort_keys=True) for file, body in files.items()}
    return owned.written(f"deferlab-vllm-video-{name}-", name, bodies)


class OwnVideoPath:
    """The steps of a vLLM video path of its own module (`reference.system.video.VideoPath`): a subclass names its
    family, its checkpoint files (``checkpoint_files``, in a folder named after ``folder_name``), how the refusal
    of ``total_pixels`` names its path (``says``), and its own ``_media_kwargs`` (its notes on the options)."""

    label = "VLLM"
    real_code = True
    family: ClassVar[str]
    checkpoint_files: ClassVar[dict[str, Any]]
    folder_name: ClassVar[str]
    says: ClassVar[str]

    def __init__(self, source: Source) -> None:
        missing = [c for c in COMPANIONS if c not in source.companions]
        if missing:
            raise Unsupported(f"n/a: {source.name} was loaded without {', '.join(missing)}, which its video path runs")
        self.source = source
        self.system = source.name
        self.name = f"{self.system} ({self.family}, video)"
        self._video = source.module(VIDEO)
        self._media = source.module(MEDIA).VideoMediaIO
        self._image_io = source.module("vllm.multimodal.media.image").ImageMediaIO
        self.folder = checkpoint_folder(self.folder_name, self.checkpoint_files)
        self.processor_name = source.module(PROCESSOR_NAME).get_video_processor_cls_name_from_config(self.folder)
        self.backend = self._video.get_video_loader_backend_for_processor(self.processor_name)
        self._lock = threading.Lock()
        self._ran: dict[str, str] = {}

    def _loader_kwargs(self, request: VideoRequest) -> dict[str, Any]:
        """``media_io_kwargs["video"]`` merged by the release over no server defaults, with the loader
        ``fetch_video`` picks (none: ``VideoMediaIO`` takes ``VLLM_VIDEO_LOADER_BACKEND``); ``total_pixels``, no
        vLLM option, is `Unsupported`."""
        if not isinstance(request, VideoRequest):
            raise InputTypeError(f"request must be a VideoRequest, got {type(request).__name__}")
        if request.total_pixels is not None:
            raise Unsupported(
                f"{self.system} takes no total_pixels (neither a media_io nor an mm_processor kwarg of its {self.says} "
                "path); accepted: fps, num_frames, min_pixels, max_pixels"
            )
        runtime = {k: v for k, v in (("fps", request.fps), ("num_frames", request.num_frames)) if v is not None}
        merged = dict(self._media.merge_kwargs(None, runtime))
        if self.backend:
            merged.setdefault("video_backend", self.backend)
        return merged

    def _media_kwargs(self, request: VideoRequest) -> tuple[dict[str, Any], tuple[str, ...]]:
        """The loader kwargs (`_loader_kwargs`) and the family's notes on the options vLLM takes and drops."""
        raise NotImplementedError

    def _fetch(self, data: bytes, request: VideoRequest) -> tuple[Any, dict[str, Any]]:
        """(frames, metadata) vLLM's own loader reads from ``data`` sent as a file (a ``file:`` URL under the
        server's ``--allowed-local-media-path``), the loader picked from the processor class as a request's is."""
        if not isinstance(data, bytes | bytearray):
            raise InputTypeError(f"data must be the encoded video's bytes, got {type(data).__name__}")
        if importlib.util.find_spec("cv2") is None:
            raise Unsupported("vLLM's 'opencv' video codec needs opencv-python-headless: install it to decode here")
        kwargs, _ = self._media_kwargs(request)
        kwargs.pop("video_backend", None)  # fetch_video picks it from the processor class, as a request does
        connector = self.source.module(CONNECTOR).MediaConnector(
            media_io_kwargs={"video": kwargs}, allowed_local_media_path=str(bytes_folder())
        )
        path = bytes_folder() / (hashlib.sha256(bytes(data)).hexdigest()[:24] + ".video")
        if not path.exists():
            path.write_bytes(bytes(data))
        return connector.fetch_video(path.as_uri(), video_processor=self.processor_name).media

    def _provenance(self, own: dict[str, str], loader: str = "", options: str = "") -> dict[str, str]:
        """The path's provenance: the loader vLLM picks (``loader`` said after it), the family's ``own`` steps, where
        the options go (``options`` said of the processor's kwargs), what ran, and the companions loaded."""
        return {
            "loader": f"real: {VIDEO}.get_video_loader_backend_for_processor({self.processor_name!r}) -> "
            f"{self.backend!r}{loader}, from {PROCESSOR_NAME}.get_video_processor_cls_name_from_config on the "
            f"checkpoint files ({VIDEO_CONFIGS[self.family][1]})",
            **own,
            "options": "fps, num_frames: media_io_kwargs['video'] (the loader); min_pixels, max_pixels: "
            f"mm_processor_kwargs{options}; the processor wrapper and tokenizer are not built",
            **self._ran,
            **{f"companion {n}": f"{n} {c.version} ({c.how})" for n, c in self.source.companions.items()},
        }
