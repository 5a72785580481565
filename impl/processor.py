"""The tokenizer-side processor (semantics §1, §4, §5): gate, then deferred items or the eager pipeline.

``Processor(config, transport, policy, cuda_available).process(images)``
mirrors upstream's ``process_mm_data_async`` minus tokenization: one item per
image, either deferred (uint8 CHW CPU feature + contract) or eager (the
image's float32 patches, on the CPU, as the ``cpu`` transport ships them).
``gate_path`` picks the gate's call site (`reference.system.policies.Policy.call_sites`:
the released processor's per-image ``artifact`` path, or the request-wide
``request`` path it keeps for cache-off requests). ``epd=True`` is the encoder-side (EPD) start path: the same gate, but the
deferred items are written by the EPD producer (``policy.epd_contract``).
``cuda_available=True`` on a CPU-only machine exercises deferral; the "GPU"
work then runs on the CPU device.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from deferlab.impl.device import resolve_device
from deferlab.impl.gate import defer_decisions
from deferlab.impl.items import MultimodalItem
from deferlab.impl.pipeline import preprocess_with, resize_configs_for
from deferlab.impl.producer import build_deferred_items, build_epd_items, eager_item
from deferlab.impl.staging import ImageLikeT, to_eager_chw
from deferlab.impl.validation import validate_images
from deferlab.reference.system.config import PreprocessConfig
from deferlab.reference.system.contract import TRANSPORTS
from deferlab.reference.system.errors import InputTypeError, InputValueError
from deferlab.reference.system.policies import PR_33921, Policy, get_policy
from deferlab.reference.system.profiles import profile


@dataclass
class ProcessorOutput:
    """The request's items in request order; ``deferred`` is one bool, or one per image under per-image gating."""

    items: list[MultimodalItem]
    deferred: bool | list[bool]
    num_tokens: list[int]


class Processor:
    """Kimi-K3 image processor under one policy and transport."""

    def __init__(
        self,
        config: PreprocessConfig | str | None = None,
        transport: str = "cpu",
        policy: Policy | str = PR_33921,
        cuda_available: bool | None = None,
        device: str | torch.device | None = None,
        epd: bool = False,
        gate_path: str | None = None,
        promote_rgb_transparency: bool = False,
    ) -> None:
        if config is None or isinstance(config, str):
            config = profile(config or "kimi-k3")
        if not isinstance(config, PreprocessConfig):
            raise InputTypeError(f"config must be a PreprocessConfig or a profile name, got {type(config).__name__}")
        if transport not in TRANSPORTS:
            raise InputValueError(f"transport must be one of {TRANSPORTS}, got {transport!r}")
        if cuda_available is not None and not isinstance(cuda_available, bool):
            raise InputTypeError(f"cuda_available must be a bool or None, got {cuda_available!r}")
        self.config = config
        self.transport = transport
        self.policy = get_policy(policy)
        self.cuda_available = torch.cuda.is_available() if cuda_available is None else cuda_available
        self.device = resolve_device(device)
        if not isinstance(epd, bool):
            raise InputTypeError(f"epd must be a bool, got {epd!r}")
        self.epd = epd
        self.gate_path, self.per_image = self.policy.gate_path(gate_path)
        # A rule no version has (no K3 commit ever promoted a keyed RGB image; semantics §3.1): kept so a
        # deliberately broken implementation can prove that claim C2's property catches it.
        self.promote_rgb_transparency = promote_rgb_transparency

    def decisions(self, images: Sequence[object]) -> list[bool]:
        """Per-image deferral as the policy's gate decides it (one request-wide answer at the PR)."""
        return defer_decisions(
            images,
            self.config,
            policy=self.policy,
            transport=self.transport,
            cuda_available=self.cuda_available,
            gate_path=self.gate_path,
        )

    def eager_items(self, images: Sequence[ImageLikeT], resize_configs: list) -> list[MultimodalItem]:
        """Preprocess on the producer's device, grouped over these images; one item per image, moved to CPU."""
        promote = self.promote_rgb_transparency
        pv, grids = preprocess_with(
            images,
            resize_configs,
            self.config.image_mean,
            self.config.image_std,
            self.config.transparent_bg_config,
            self.config.patch_size,
            self.device,
            stage=lambda img: to_eager_chw(img, self.device, promote_rgb_transparency=promote),
        )
        counts = [int(g[1] * g[2]) for g in grids.tolist()]
        return [eager_item(p.cpu(), g) for p, g in zip(pv.split(counts), grids, strict=True)]

    def process_request(self, images: Sequence[ImageLikeT], placeholders: int) -> ProcessorOutput:
        """`process` for a request whose prompt holds ``placeholders`` image tokens: one image per placeholder.

        Why: a prompt that names more or fewer images than it carries cannot be expanded (semantics §5.1,
        step 2), so it is refused with a ValueError before anything is loaded or preprocessed.
        """
        if placeholders != len(images):
            raise ValueError(
                "Kimi image placeholders must map one-to-one to image data: "
                f"expected {len(images)}, found {placeholders} token(s)"
            )
        return self.process(images)

    def process(self, images: Sequence[ImageLikeT]) -> ProcessorOutput:
        """Gate the request, then build deferred and/or eager items, in request order."""
        if self.policy.validate_inputs:
            validate_images(images, self.config)
        images = list(images)
        decided = self.decisions(images)
        resize_configs = resize_configs_for(images, self.config)
        items: list[MultimodalItem | None] = [None] * len(images)
        deferred_pos = [i for i, d in enumerate(decided) if d]
        eager_pos = [i for i, d in enumerate(decided) if not d]
        if deferred_pos:
            build = build_epd_items if self.epd else build_deferred_items
            built = build(
                [images[i] for i in deferred_pos], [resize_configs[i] for i in deferred_pos], self.config, self.policy
            )
            for i, item in zip(deferred_pos, built, strict=True):
                items[i] = item
        if eager_pos:
            built = self.eager_items([images[i] for i in eager_pos], [resize_configs[i] for i in eager_pos])
            for i, item in zip(eager_pos, built, strict=True):
                items[i] = item
        flag: bool | list[bool] = decided if self.per_image else bool(decided and decided[0])
        return ProcessorOutput(items=items, deferred=flag, num_tokens=[rc.num_tokens for rc in resize_configs])
