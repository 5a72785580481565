"""Real SGLang behind the property seam: ``pytest --sglang SPEC`` (SPEC: ``installed``, a checkout path, a version).

Why an adapter here and not in ``impl.sglang``: the driver runs SGLang's code
and knows nothing of deferlab's claims; the seam adds what a claim needs to
*ask* the system (its gate call sites, whether it defers at all, its
scheduler whitelist, its IPC count sources) and the per-method provenance
the report shows. Each answer comes from running SGLang's own code
(`impl.sglang`); none is read off a version number.

Claim verdicts of real code are recorded under the one label `LABEL`
(``"SGLANG"``): the version is what it is, so there is no policy to choose;
``policy`` arguments are ignored.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from typing import Any

import numpy as np
import torch

from deferlab.reference.system.config import BackgroundConfig, PreprocessConfig
from deferlab.reference.system.profiles import profile

LABEL = "SGLANG"
# Seam method -> the driver's provenance keys that describe it.
_PROVENANCE_KEYS = {
    "to_chw_uint8": ("to_chw_uint8",),
    "resize": ("resize",),
    "fill_transparent_bg": ("fill_transparent_bg",),
    "normalize_and_patchify": ("normalization_tensors", "normalize_and_patchify"),
    "preprocess": ("preprocess",),
    "gate_bytes": ("gate_bytes",),
    "defer_decisions": ("gate (defer_decisions)",),
    "process": ("process (deferred items)", "process (eager items)", "items"),
    "epd_items": ("epd_items",),
    "deliver": ("deliver",),
    "materialize": ("materialize", "epd cpu backend materialization"),
    "vision_dp": ("vision_dp owners", "vision_dp gather", "vision_dp h2d_copies"),
    "gate_paths": ("gate (defer_decisions)",),
    "defers": ("deferred path",),
    "skip_pre_embed": ("can_skip_pre_embed",),
    "ack_counts": ("ipc producer_total", "ipc consumer_requested", "ipc resolve"),
}


class SGLangSeam:
    """`properties.seam.Impl` over `impl.sglang.driver.SGLangImpl` (one SGLang version per process)."""

    real_code = True

    def __init__(self, spec: str | None = None, driver: Any = None) -> None:
        if driver is None:
            from deferlab.impl.sglang.driver import SGLangImpl

            driver = SGLangImpl(spec)
        self.driver = driver
        self.name = driver.name
        self.source = driver.source

    def describe(self) -> dict[str, Any]:
        """What ran: the SGLang version, where it came from (and its commit), and every stand-in import."""
        src = self.source
        return {
            "name": self.name,
            "version": src.version,
            "kind": src.kind,
            "spec": src.spec,
            "root": str(src.root),
            "commit": src.git_rev,
            "load_seconds": round(float(src.load_seconds or 0.0), 2),
            "stand_ins": [s.as_dict() for s in src.stand_ins],
        }

    # -- the pipeline steps: SGLang's own functions through the driver ------------------------------------------
    def to_chw_uint8(self, image: Any, *, promote_rgb_transparency: bool = False) -> Any:
        return self.driver.to_chw_uint8(image, promote_rgb_transparency=promote_rgb_transparency)

    def resize(self, x: np.ndarray, out_h: int, out_w: int, device: str = "cpu") -> Any:
        return self.driver.resize(x, out_h, out_w, device)

    def fill_transparent_bg(self, x: np.ndarray, background: BackgroundConfig | None, device: str = "cpu") -> Any:
        return self.driver.fill_transparent_bg(x, background, device)

    def normalize_and_patchify(
        self,
        x: np.ndarray,
        mean: Sequence[float],
        std: Sequence[float],
        patch_size: int,
        padded_h: int,
        padded_w: int,
        device: str = "cpu",
    ) -> Any:
        return self.driver.normalize_and_patchify(x, mean, std, patch_size, padded_h, padded_w, device)

    def preprocess(self, images: Sequence[Any], config: PreprocessConfig, device: str = "cpu") -> tuple[Any, Any]:
        return self.driver.preprocess(images, config, device)

    def gate_bytes(self, images: Sequence[Any], config: PreprocessConfig) -> tuple[int, int]:
        return self.driver.gate_bytes(images, config)

    def defer_decisions(
        self,
        images: Sequence[Any],
        config: PreprocessConfig,
        *,
        policy: Any = None,
        transport: str = "cpu",
        cuda_available: bool = True,
        gate_path: str | None = None,
    ) -> list[bool]:
        return self.driver.defer_decisions(
            images, config, transport=transport, cuda_available=cuda_available, gate_path=gate_path
        )

    def process(
        self,
        images: Sequence[Any],
        config: PreprocessConfig,
        *,
        policy: Any = None,
        transport: str = "cpu",
        epd: bool = False,
        device: str = "cpu",
        gate_path: str | None = None,
    ) -> Any:
        return self.driver.process(images, config, transport=transport, epd=epd, device=device, gate_path=gate_path)

    def epd_items(
        self, images: Sequence[Any], config: PreprocessConfig, *, policy: Any = None, backend: str = "gpu"
    ) -> list[Any]:
        return self.driver.epd_items(images, config, backend=backend)

    def deliver(self, items: Sequence[Any], num_ranks: int, *, policy: Any = None) -> list[list[Any]]:
        return self.driver.deliver(items, num_ranks)

    def materialize(
        self,
        items: Sequence[Any],
        owner_indices: Sequence[int],
        config: PreprocessConfig,
        *,
        policy: Any = None,
        device: str = "cpu",
    ) -> Any:
        if any(self._backend(items[i]) == "cpu" for i in owner_indices):
            raise NotImplementedError(
                f"{self.name}: the EPD 'cpu' backend's owner runs the checkpoint's own HF image processor, which "
                "SGLang does not ship; that consumer is not run here (its producer's keys are still checked)"
            )
        return self.driver.materialize(items, owner_indices, config, device=device)

    def _backend(self, item: Any) -> str | None:
        cfg = item.model_specific_data.get(self.source.deferred_key)
        if cfg is None:
            return None
        return cfg.get("backend") if isinstance(cfg, dict) else getattr(cfg, "backend", None)

    def vision_dp(
        self, items: Sequence[Any], num_ranks: int, config: PreprocessConfig, *, policy: Any = None, device: str = "cpu"
    ) -> Any:
        return self.driver.vision_dp(items, num_ranks, config, device=device)

    # -- facts, each measured by running SGLang's code ----------------------------------------------------------
    @cached_property
    def _gate_paths(self) -> list[tuple[str, bool]]:
        """Each call site the loaded code has, measured with a two-image request: one gate call per image
        means it decides per image.

        Only sites whose method exists and calls the gate (read off the code by the driver's
        `impl.sglang.capabilities`): the artifact path first where it exists (SGLang's default for K3
        while its preprocess cache is on), then the request path (``_process_mm_data_uncached``, or at
        the PR ``process_mm_data_async`` itself). A version without the deferred path has no gate and one
        eager path, named after the call site it resembles: ``[("request", False)]`` (claims that need
        a gate record ``n/a`` through `defers`).
        """
        from deferlab.impl.sglang import producer

        if not self.defers(None):
            return [("request", False)]
        two = [torch.zeros((3, 32, 32), dtype=torch.uint8), torch.zeros((3, 28, 20), dtype=torch.uint8)]
        sites = []
        for path in self.driver.capabilities.paths:
            calls = producer.gate_calls(self.source, two, profile("kimi-k3"), "cpu", True, path)
            sites.append((path, len(calls) == 2 and all(c.n_images == 1 for c in calls)))
        if not sites:
            raise RuntimeError(f"{self.name}: the deferred path is present but no call site calls the gate")
        return sites

    def gate_paths(self, policy: Any) -> list[tuple[str, bool]]:
        return list(self._gate_paths)

    def defers(self, policy: Any) -> bool:
        """Whether this version has the owner-deferred path, as the driver read it off the loaded code."""
        return bool(self.driver.has_deferred_path)

    def has_epd(self, policy: Any) -> bool:
        return bool(self.driver.capabilities.epd_producer)

    def skip_pre_embed(self, policy: Any) -> bool:
        return bool(self.driver.can_skip_pre_embed("KimiK3ForConditionalGeneration"))

    def ack_counts(self, policy: Any) -> list[Any]:
        """The real count sources, one per transport pool the version has (CUDA IPC and VMM declare K_p
        differently; 0.5.17 has only its CUDA IPC counter pool)."""
        every = self.driver.ack_counts(transport="all")
        return [every.for_transport(t) for t in every.transports]

    @cached_property
    def _provenance(self) -> dict[str, str]:
        raw = self.driver.provenance()
        out = {
            method: "; ".join(raw[k] for k in keys if k in raw) or "modelled: no provenance recorded"
            for method, keys in _PROVENANCE_KEYS.items()
        }
        return out

    def provenance(self) -> dict[str, str]:
        return dict(self._provenance)
