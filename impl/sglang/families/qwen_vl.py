"""SGLang's Qwen-VL processor (``processors/qwen_vl.py``) as a `FamilyPath` for Qwen2.5-VL and Qwen3-VL.

Why through SGLang and transformers both: SGLang does not preprocess Qwen images itself (it pre-resizes
video only); it hands them to the checkpoint's transformers image processor on the fast-processor device,
rescale and normalize on. So the release's pinned transformers (5.19.0 for 0.5.23) and a torchvision run
here as the loader's companions (`loader.companions`: fetched like the engine's wheel, imported ahead of the
installed ones); the source must have been loaded with them (`sources.load(spec, companions=...)`) in a
process that had not imported transformers yet.

What runs: ``QwenVLImageProcessor.__init__`` (its base class's answered, `common.construct`), the image path
SGLang's artifact layer runs (``snapshot_media_source``, ``decode_media_snapshot``, ``_artifact_key``, then
``prepare_artifact_batch``, which calls ``processor.image_processor(images=..., return_tensors="pt",
**image_kwargs)`` with the device its own ``_fast_image_processor_device`` gives: none on a machine without
CUDA, so transformers runs on the CPU tensors; on a CUDA server it is ``cuda:<base_gpu_id>``, modelled here by
the CPU). Qwen3-VL takes that path by default (``uses_media_artifacts_without_cache``); Qwen2.5-VL's default
(cache off) loads each image through ``_load_single_item`` first (``convert("RGB")`` for non-RGB), which is
done here too, and then hands the same images with the same kwargs to the image processor inside the HF
processor's ``__call__``. The image processor is transformers' ``AutoImageProcessor`` for the checkpoint's
``preprocessor_config.json`` (backend resolved by transformers: torchvision). The prompt's tokens are
SGLang's ``build_input_ids``; the geometry is transformers' ``get_number_of_image_patches`` (its locals read
at return). The tower's cast to bfloat16 is the model's (``.type(visual.dtype)``), modelled as ``.to``.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import types
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from deferlab.impl.sglang.families import common
from deferlab.impl.sglang.runtime import capture_locals, run_with_globals
from deferlab.impl.sglang.sources import SGLangSourceError
from deferlab.impl.sglang.tokenizer import StubTokenizer
from deferlab.reference.system.errors import InputValueError
from deferlab.reference.system.family_configs import QwenVLConfig
from deferlab.reference.system.served import Geometry
from deferlab.reference.system.validate import check_positive_int

MODULE = "sglang.srt.multimodal.processors.qwen_vl"
COMPANIONS = ("transformers", "torchvision")
MODEL_TYPES = {"qwen2.5-vl": "qwen2_5_vl", "qwen3-vl": "qwen3_vl"}
# Qwen's tokenizer ids of <|vision_start|>, <|vision_end|>, <|image_pad|>, <|video_pad|> (every Qwen2.5/3-VL checkpoint)
TOKEN_IDS = {"vision_start_token_id": 151652, "vision_end_token_id": 151653, "image_token_id": 151655}
VIDEO_TOKEN_ID = 151656
_GRID = ("resized_height", "resized_width", "grid_h", "grid_w")


class _Tokenizer(StubTokenizer):
    """The stub tokenizer, naming Qwen's video token when SGLang's special-token table asks for it."""

    def convert_ids_to_tokens(self, ids: Sequence[int]) -> list[str]:
        return ["<|video_pad|>" if i == VIDEO_TOKEN_ID else f"<{i}>" for i in ids]


def preprocessor_config(
    cfg: Any, config_type: type = QwenVLConfig, processor_type: str = "Qwen2VLImageProcessor"
) -> dict[str, Any]:
    """The ``preprocessor_config.json`` transformers reads: a published dict as given (checked by its reader), or
    the keys of a `QwenVLConfig` (``config_type``, naming ``processor_type``)."""
    common.typed_config(cfg, config_type, config_type.from_preprocessor_config, "preprocessor_config")
    if isinstance(cfg, Mapping):
        return dict(cfg)
    keys = ("patch_size", "temporal_patch_size", "merge_size", "rescale_factor", "do_rescale", "do_normalize")
    return {
        "image_processor_type": processor_type,
        "size": {"shortest_edge": cfg.min_pixels, "longest_edge": cfg.max_pixels},
        "image_mean": list(cfg.image_mean),
        "image_std": list(cfg.image_std),
        "do_convert_rgb": cfg.do_convert_rgb,
        "resample": cfg.resample,
        **{k: getattr(cfg, k) for k in keys},
    }


def _frozen(cfg: Any, config_type: type = QwenVLConfig, processor_type: str = "Qwen2VLImageProcessor") -> str:
    return json.dumps(preprocessor_config(cfg, config_type, processor_type), sort_keys=True)


class QwenVLPath(common.FamilyPathBase):
    """SGLang's Qwen-VL image path: transformers' torchvision processor, run where SGLang puts it."""

    dtype = "bfloat16"
    # what a subclass for another family of the same SGLang processor changes (`paddleocr_vl.PaddleOCRVLPath`)
    engine_class = "QwenVLImageProcessor"
    model_types = MODEL_TYPES
    config_type: type = QwenVLConfig
    processor_type = "Qwen2VLImageProcessor"

    def __init__(
        self, source: Any, module: types.ModuleType, family: str = "qwen2.5-vl", dtype: str = "bfloat16"
    ) -> None:
        if dtype not in ("bfloat16", "float32"):
            raise InputValueError(f"dtype: {dtype!r}; accepted: 'bfloat16' (the tower's cast) or 'float32' (none)")
        if not all(c in getattr(source, "companions", {}) for c in COMPANIONS):
            raise SGLangSourceError(
                f"sglang source {source.spec!r}: the Qwen-VL path needs the companions {COMPANIONS}"
            )
        super().__init__(source, module)
        self.family = family
        self.dtype = dtype  # float32: the processor's own values, before the model casts them to the tower's dtype
        self.model_type = self.model_types[family]
        self.cls = getattr(module, self.engine_class)
        self.transformers = source.companions["transformers"]  # its version: in provenance and the source's records

    def image_processor(self, cfg: Any) -> Any:
        """transformers' image processor for the checkpoint's ``preprocessor_config.json`` (its own resolution)."""
        auto = self.transformers.module("transformers").AutoImageProcessor
        with tempfile.TemporaryDirectory(prefix="deferlab-qwen-") as folder:
            found = preprocessor_config(cfg, self.config_type, self.processor_type)
            (Path(folder) / "preprocessor_config.json").write_text(json.dumps(found))
            return auto.from_pretrained(folder)

    def processor(self, cfg: Any) -> Any:
        """SGLang's ``QwenVLImageProcessor`` for ``cfg`` (built once per config)."""
        frozen = _frozen(cfg, self.config_type, self.processor_type)
        return self.cached(("proc", frozen), lambda: self._build(cfg))

    def _build(self, cfg: Any) -> Any:
        ip = self.image_processor(cfg)
        vision = types.SimpleNamespace(spatial_merge_size=ip.merge_size, tokens_per_second=2)
        hf_config = types.SimpleNamespace(
            model_type=self.model_type, vision_config=vision, video_token_id=VIDEO_TOKEN_ID, **TOKEN_IDS
        )
        tokenizer = _Tokenizer()
        hf = types.SimpleNamespace(tokenizer=tokenizer, image_processor=ip)
        server_args = types.SimpleNamespace(base_gpu_id=0)
        proc = self.construct(hf_config, server_args, hf)
        # what the base class's __init__ sets from default server args (no mm_process_config, backend auto, CPU
        # transport, the preprocess cache off) and the fingerprint artifact keys are built from
        digest = hashlib.sha256(_frozen(cfg, self.config_type, self.processor_type).encode()).hexdigest()[:16]
        base = {
            "_tokenizer": tokenizer,
            "image_config": {},
            "disable_fast_image_processor": False,
            "mm_feature_transport": "cpu",
            "mm_preprocess_cache": types.SimpleNamespace(enabled=False),
            "mm_processor_executor": None,
            "processor_fingerprint": f"deferlab-{digest}",
        }
        for name, value in base.items():
            setattr(proc, name, value)
        deterministic = types.SimpleNamespace(deterministic=types.SimpleNamespace(rl_on_policy_target=None))
        own = type(proc)._fast_image_processor_device.__get__(proc)
        proc._fast_image_processor_device = run_with_globals(own, get_exec=lambda: deterministic)
        self.source.patch(
            f"{self.cls.__module__}.{self.cls.__qualname__}._fast_image_processor_device",
            "own code with get_exec() answering the default exec settings (rl_on_policy_target None): no server "
            "published them here",
        )
        return proc

    def construct(self, hf_config: Any, server_args: Any, hf: Any) -> Any:
        """SGLang's processor built by its own ``__init__`` (`common.construct`)."""
        return common.construct(self.source, self.cls, hf_config, server_args, hf)

    def _entries(self, proc: Any, images: Sequence[Any]) -> list[Any]:
        """SGLang's artifact inputs for ``images``: Qwen2.5-VL's default loads each through ``_load_single_item``
        first; both then snapshot, decode and key it with the mixin's own functions."""
        sb = self.source.module("managers.schedule_batch")
        base = self.source.module("multimodal.media_artifacts.base")
        entries = []
        for image in images:
            if not proc.uses_media_artifacts_without_cache:
                image = self.cls._load_single_item(image, sb.Modality.IMAGE, discard_alpha_channel=True)
            snap = proc.snapshot_media_source(image, sb.Modality.IMAGE)
            media = proc.decode_media_snapshot(snap, sb.Modality.IMAGE)
            key = proc._artifact_key(snap.content_digest, image)
            entries.append(base.MediaArtifactInput(snap.content_digest, key, sb.Modality.IMAGE, media))
        return entries

    def _tokens(self, proc: Any, grids: torch.Tensor) -> list[int]:
        """The image tokens SGLang's ``build_input_ids`` gives each image of a prompt with one placeholder each."""
        ids = [1]
        for _ in range(len(grids)):
            ids += [proc.vision_start_token_id, proc.IM_TOKEN_ID, proc.vision_end_token_id, 2]
        _, offsets, _ = proc.build_input_ids(ids, img_grid_thw=grids)
        return [int(end - start + 1) for start, end in offsets]

    def run(self, images: Sequence[Any], cfg: Any) -> tuple[np.ndarray, np.ndarray, list[int]]:
        """``prepare_artifact_batch`` on ``images``: (patches (N, 3, T*p*p) bfloat16 widened, grid_thw, tokens)."""
        proc = self.processor(cfg)
        artifacts = proc.prepare_artifact_batch(self._entries(proc, images))
        feats = torch.cat([a.feature for a in artifacts])
        if self.dtype == "bfloat16":
            feats = feats.to(torch.bfloat16)  # the tower's cast (module docstring)
        grids = torch.cat([a.model_specific_data["image_grid_thw"] for a in artifacts])
        values = common.widen(feats)
        return values.reshape(len(values), 3, -1), grids.numpy().astype(np.int64), self._tokens(proc, grids)

    def geometry(self, width: int, height: int, cfg: Any) -> Geometry:
        """transformers' ``get_number_of_image_patches`` for the image processor SGLang holds (pixel-free)."""
        proc = self.processor(cfg)
        width, height = check_positive_int("width", width), check_positive_int("height", height)
        ip = proc._processor.image_processor
        _, seen = capture_locals(type(ip).get_number_of_image_patches, _GRID, ip, height, width, {})
        grid = (1, int(seen["grid_h"]), int(seen["grid_w"]))
        tokens = self._tokens(proc, torch.tensor([grid]))[0]
        return Geometry(int(seen["resized_width"]), int(seen["resized_height"]), grid, tokens)

    def levels(self, cfg: Any) -> np.ndarray:
        """(3, 256): what the path gives each level, read off a served image it does not resize."""
        ip = self.processor(cfg)._processor.image_processor
        factor = ip.patch_size * ip.merge_size
        side = factor * max(1, int(np.ceil(np.sqrt(max(ip.size["shortest_edge"], common.LEVELS)) / factor)))
        g = self.geometry(side, side, cfg)
        if (g.width, g.height) != (side, side):
            raise RuntimeError(f"{self.system} Qwen-VL: a {side}x{side} image is resized ({g})")
        image = common.level_image(side, side)
        values, grid, _ = self.run([Image.fromarray(image)], cfg)
        return common.canvas_levels(self._canvas(values, grid[0], ip), image, f"{self.system} Qwen-VL")

    @staticmethod
    def _canvas(values: np.ndarray, grid: np.ndarray, ip: Any) -> np.ndarray:
        """(C, H, W) of one image's patches: merge windows row-major, (C, T, p, p) inside each patch, frame 0."""
        _, gh, gw = (int(g) for g in grid)
        m, p, t = ip.merge_size, ip.patch_size, ip.temporal_patch_size
        blocks = values.reshape(gh // m, gw // m, m, m, 3, t, p, p)[..., 0, :, :]
        return blocks.transpose(4, 0, 2, 5, 1, 3, 6).reshape(3, gh * p, gw * p)

    def provenance(self) -> dict[str, str]:
        cls = f"{MODULE}.QwenVLImageProcessor"
        ip_module = f"transformers.models.qwen2_vl.image_processing_qwen2_vl ({self.transformers.version})"
        artifacts = "the mixin's snapshot_media_source / decode_media_snapshot / _artifact_key (own)"
        load = f"{cls}._load_single_item (own: the default cache-off path), then {artifacts}"
        if self.model_type == "qwen3_vl":
            load = f"{artifacts}: its default artifact path (uses_media_artifacts_without_cache)"
        return {
            "processor": f"{cls}.__init__ (own; its base class's __init__ answered by deferlab, default server args)",
            "load": load,
            "serve": f"{cls}.prepare_artifact_batch (own) -> {ip_module}.Qwen2VLImageProcessor (torchvision backend)",
            "device": f"{cls}._fast_image_processor_device (own): no CUDA-alike platform here, so no device and "
            "transformers runs on the CPU; on a CUDA server cuda:<base_gpu_id> (modelled by the CPU)",
            "image_processor": "transformers.AutoImageProcessor.from_pretrained of the checkpoint's "
            "preprocessor_config.json (its own backend resolution)",
            "cast": "the model's cast to the tower's dtype (.type(visual.dtype)), modelled as .to(bfloat16)",
            "geometry": f"{ip_module}.Qwen2VLImageProcessor.get_number_of_image_patches (own; locals at return)",
            "num_tokens": "sglang.srt.multimodal.processors.base_processor.BaseMultimodalProcessor.build_input_ids "
            "(own)",
            "levels": "a served image the processor does not resize, read per level",
        }
