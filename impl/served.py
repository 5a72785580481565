"""Any seam implementation's two Kimi-K3 paths as `ServedPath`s: what its eager producer and deferred owner feed
the tower.

Why two: under CUDA IPC (or a gate that says no) the tokenizer-side producer
preprocesses the image itself and ships float32 patches (``eager``); under CPU
transport the owner rank runs the owner pipeline with the hooks its loader
builds (``deferred``: the seam's ``preprocess``). Either is cast to BF16 by the
tower. Written once over the seam protocol, so deferlab's model under a policy
(`model_paths`) and SGLang's own code (``impl.sglang.served``) are the same
adapter; only the resize-config function (the prompt's image tokens and the
geometry) is the implementation's own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from deferlab.reference.system.config import PreprocessConfig
from deferlab.reference.system.seam import to_numpy

PATHS = ("eager", "deferred")


class SeamPath:
    """One path (``"eager"`` or ``"deferred"``) of a seam implementation, under ``policy`` (None for real code)."""

    dtype = "bfloat16"

    def __init__(
        self,
        impl: Any,
        path: str,
        *,
        label: str,
        system: str,
        resize_config: Callable[[int, int, PreprocessConfig], Any],
        policy: str | None = None,
        provenance: dict[str, str] | None = None,
    ) -> None:
        if path not in PATHS:
            raise ValueError(f"path {path!r}: accepted {', '.join(PATHS)}")
        self.impl, self.path, self.label, self.system, self.policy = impl, path, label, system, policy
        self.real_code = bool(getattr(impl, "real_code", False))
        self.name = f"{system} ({path})"
        self._resize_config = resize_config
        self._provenance = provenance or {}

    def serve(self, images: Sequence[Any], cfg: PreprocessConfig) -> tuple[np.ndarray, np.ndarray]:
        if self.path == "deferred":
            pv, grids = self.impl.preprocess(list(images), cfg)
            return to_numpy(pv).astype(np.float32, copy=False), to_numpy(grids).astype(np.int64, copy=False)
        out = self.impl.process(list(images), cfg, policy=self.policy, transport="cuda_ipc")
        deferred = out.deferred if isinstance(out.deferred, list) else [out.deferred]  # a per-request gate: one bool
        if any(deferred):
            raise RuntimeError(f"{self.name}: the producer deferred an image under CUDA IPC")
        feats = [to_numpy(it.feature).astype(np.float32, copy=False) for it in out.items]
        grids = [to_numpy(it.model_specific_data["image_grid_thw"]).reshape(-1, 3) for it in out.items]
        return np.concatenate(feats), np.concatenate(grids).astype(np.int64)

    def _rc(self, width: int, height: int, cfg: PreprocessConfig) -> dict[str, int]:
        rc = self._resize_config(width, height, cfg)
        return rc if isinstance(rc, dict) else {**rc.to_dict(), "num_tokens": rc.num_tokens}

    def num_tokens(self, width: int, height: int, cfg: PreprocessConfig) -> int:
        return int(self._rc(width, height, cfg)["num_tokens"])

    def geometry(self, width: int, height: int, cfg: PreprocessConfig) -> tuple[int, int, int, int]:
        rc = self._rc(width, height, cfg)
        return rc["new_width"], rc["new_height"], rc["pad_width"], rc["pad_height"]

    def geometry_function(self, cfg: PreprocessConfig) -> Callable[[int, int], dict[str, int]]:
        """The resize-config function with the config bound: (w, h) -> dict (for exhaustive sweeps)."""
        return lambda w, h: self._rc(w, h, cfg)

    def provenance(self) -> dict[str, str]:
        return dict(self._provenance)


def model_paths(policy: str) -> list[SeamPath]:
    """deferlab's model under ``policy``: its eager and deferred paths (model code, not a finding)."""
    from deferlab.impl.navit import navit_resize_config
    from deferlab.impl.seam import DeferlabImpl

    impl = DeferlabImpl()
    prov = {"serve": "model", "num_tokens": "model", "geometry": "model"}
    return [
        SeamPath(
            impl,
            p,
            label=policy,
            system=f"deferlab-model/{policy}",
            resize_config=navit_resize_config,
            policy=policy,
            provenance=prov,
        )
        for p in PATHS
    ]
