"""deferlab's own torch model (``impl/``) behind the seam protocol (`reference.system.seam.Impl`).

The model is one implementation under test among others (real SGLang is
`impl.sglang.driver.SGLangImpl`); every method calls ``impl``, and every
fact about a version comes from its `reference.system.policies.Policy`. It
knows the protocol from the description room only, never from the test
harness (``properties.seam`` names it as ``"deferlab.impl.seam:DeferlabImpl"``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from deferlab.reference.system.config import BackgroundConfig
from deferlab.reference.system.policies import get_policy
from deferlab.reference.system.seam import Array, Background, Config, Floats, Images, Items, call_methods


class DeferlabImpl:
    """deferlab's own torch implementation (``impl/``) behind the `Impl` protocol."""

    name = "deferlab"
    # Extra `impl.processor.Processor` arguments of `process`, read only: a subclass that differs from this
    # model by one producer option (`properties.broken.BrokenPromotion`) sets it instead of copying `process`.
    _processor_options: ClassVar[Mapping[str, Any]] = {}

    def to_chw_uint8(self, image: Any, *, promote_rgb_transparency: bool = False) -> Any:
        from deferlab.impl.staging import to_chw_uint8

        return to_chw_uint8(image, promote_rgb_transparency=promote_rgb_transparency)

    def resize(self, x: Array, out_h: int, out_w: int, device: str = "cpu") -> Any:
        import torch

        from deferlab.impl.resize import resize_bicubic_if_needed

        t = torch.as_tensor(x, dtype=torch.float32, device=device)[None]
        return resize_bicubic_if_needed(t, out_h, out_w)[0]

    def fill_transparent_bg(self, x: Array, background: Background, device: str = "cpu") -> Any:
        import torch

        from deferlab.impl.background import fill_transparent_bg

        t = torch.as_tensor(x, dtype=torch.float32, device=device)[None]
        if isinstance(background, Mapping):  # the checkpoint's dict, read as its processor reads it
            background = BackgroundConfig.from_dict(background)
        return fill_transparent_bg(t, background)[0]

    def normalize_and_patchify(
        self, x: Array, mean: Floats, std: Floats, patch_size: int, padded_h: int, padded_w: int, device: str = "cpu"
    ) -> Any:
        import torch

        from deferlab.impl.normalize import normalization_tensors, normalize_and_patchify

        scale, bias = normalization_tensors(mean, std, device)
        t = torch.as_tensor(x, dtype=torch.float32, device=device)[None]
        return normalize_and_patchify(t, scale, bias, patch_size, padded_h, padded_w)[0]

    def preprocess(self, images: Images, config: Config, device: str = "cpu") -> tuple[Any, Any]:
        from deferlab.impl.pipeline import preprocess

        return preprocess(images, config, device=device)

    def gate_bytes(self, images: Images, config: Config) -> tuple[int, int]:
        from deferlab.impl.gate import payload_bytes

        return payload_bytes(images, config)

    def defer_decisions(
        self,
        images: Images,
        config: Config,
        *,
        policy: Any,
        transport: str = "cpu",
        cuda_available: bool = True,
        gate_path: str | None = None,
    ) -> list[bool]:
        from deferlab.impl.processor import Processor

        proc = Processor(
            config, transport=transport, policy=policy, cuda_available=cuda_available, device="cpu", gate_path=gate_path
        )
        return list(proc.decisions(images))

    def process(
        self,
        images: Images,
        config: Config,
        *,
        policy: Any,
        transport: str = "cpu",
        epd: bool = False,
        device: str = "cpu",
        gate_path: str | None = None,
    ) -> Any:
        from deferlab.impl.processor import Processor

        proc = Processor(
            config,
            transport=transport,
            policy=policy,
            cuda_available=True,
            device=device,
            epd=epd,
            gate_path=gate_path,
            **self._processor_options,
        )
        return proc.process(images)

    def epd_items(self, images: Images, config: Config, *, policy: Any, backend: str = "gpu") -> list[Any]:
        from deferlab.impl.navit import navit_resize_config
        from deferlab.impl.producer import build_epd_items, encoder_media
        from deferlab.impl.staging import encoder_dimensions

        images = encoder_media(images)  # dict media items {"type": "image", "image": ...} as the encoder gets them
        sizes = [navit_resize_config(*encoder_dimensions(img), config) for img in images]
        return build_epd_items(images, sizes, config, get_policy(policy), backend)

    def process_request(
        self, images: Images, config: Config, *, placeholders: int, policy: Any, transport: str = "cpu"
    ) -> Any:
        """The producer on a request whose prompt holds ``placeholders`` image tokens (`Processor.process_request`:
        one image per placeholder, else a ValueError)."""
        from deferlab.impl.processor import Processor

        proc = Processor(config, transport=transport, policy=policy, cuda_available=True, device="cpu")
        return proc.process_request(images, placeholders)

    def deliver(self, items: Items, num_ranks: int, *, policy: Any) -> list[list[Any]]:
        from deferlab.impl.transport import deliver

        return deliver(items, "cpu", num_ranks, policy).rank_items

    def materialize(
        self, items: Items, owner_indices: Sequence[int], config: Config, *, policy: Any, device: str = "cpu"
    ) -> Any:
        from deferlab.impl.model import materialize

        return materialize(items, list(owner_indices), config, device=device, policy=policy)

    def vision_dp(self, items: Items, num_ranks: int, config: Config, *, policy: Any, device: str = "cpu") -> Any:
        from deferlab.impl.model import get_image_features

        return get_image_features(items, num_ranks, config, device=device, policy=policy)

    def vision_dp_embeddings(
        self, features: Any, grids: Any, num_ranks: int, tower: Any, *, rope_type: str = "rope_2d",
        pool_temporal_dimension: bool = True, whole: bool = False, device: str = "cpu",
    ) -> list[Any]:  # fmt: skip
        """Each rank's embeddings from the vision-DP runner run whole with ``tower`` (`impl.vision_dp`; the
        model's tower call does not depend on ``rope_type``, ``whole`` or the temporal pooling)."""
        from deferlab.impl.vision_dp import run_sharded

        return run_sharded(features, grids, num_ranks, tower)

    def gate_paths(self, policy: Any) -> list[tuple[str, bool]]:
        return list(get_policy(policy).call_sites)

    def defers(self, policy: Any) -> bool:
        return get_policy(policy).defer_enabled

    def has_epd(self, policy: Any) -> bool:
        return get_policy(policy).epd_deferred

    def skip_pre_embed(self, policy: Any) -> bool:
        from deferlab.impl.model import KimiK3ForConditionalGeneration
        from deferlab.impl.scheduler import can_skip_pre_embed_feature_move
        from deferlab.reference.system.profiles import profile

        model = KimiK3ForConditionalGeneration(profile("kimi-k3"), "cpu", policy)
        return can_skip_pre_embed_feature_move(model.get_image_feature, get_policy(policy))

    def skips_pre_embed_move(self, fn: Any, policy: Any = None) -> bool:
        from deferlab.impl.scheduler import can_skip_pre_embed_feature_move

        return can_skip_pre_embed_feature_move(fn, get_policy(policy))

    def ack_counts(self, policy: Any) -> list[Any]:
        return [get_policy(policy)]  # sim.ipc reads a policy through sim.ipc.machine.PolicyCounts

    def provenance(self) -> dict[str, str]:
        return dict.fromkeys(call_methods(), "model")
