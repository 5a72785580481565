"""`SGLangImpl`: the real SGLang behind deferlab's property seam, itself an implementation of its ``Impl``.

Why: the properties were written against deferlab's own torch model; pointed
at this class they check the code SGLang ships instead. Every method calls
SGLang's function for that step (never deferlab's ``impl/``), with the
deviations `runtime` documents; the facts a claim asks (gate call sites,
whether it defers, its whitelist, its IPC count sources) are measured by
running that code, never read off a version number. `provenance()` says per
seam method whether it ran for real, patched, or is modelled and why.
``policy`` arguments are accepted and ignored: a release behaves as it
behaves, so its verdicts are recorded under the one label `LABEL`.

An eager-only release (0.5.17: a Kimi-K3 processor without the deferred
path, `has_deferred_path` False, read off its code) runs what it has: its
eager stager ``_k3_to_cuda_chw``, its ``_fill_transparent_bg``, its
wrapper's normalization constants, K2.5's shared pipeline with the eager
hooks, the eager producer and its model's loader. What it lacks (the gate,
the EPD producer) raises `NotImplementedError` naming the version, except
`defer_decisions`: with no gate every image is eager, so ``[False] * n``.

Use it as ``pytest --sglang SPEC`` or ``--impl deferlab.impl.sglang.driver:SGLangImpl`` (the
version comes from ``DEFERLAB_SGLANG``, default ``0.5.23``), or ``SGLangImpl("0.5.20")``.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import Any

import numpy as np
import torch
from PIL import Image

from deferlab.impl.loader.provenance import describe as _describe
from deferlab.impl.sglang import capabilities, consumer, features, producer, provenance, runtime, vision_dp
from deferlab.impl.sglang.ackcounts import SGLangAckCounts
from deferlab.impl.sglang.counts import IPCCounts
from deferlab.impl.sglang.sources import Source, load
from deferlab.reference.system.config import PreprocessConfig
from deferlab.reference.system.errors import InputTypeError
from deferlab.reference.system.profiles import profile
from deferlab.reference.system.seam import SGLANG_LABEL, Array, Background, Config, Floats, Images, Items

DEFAULT_VERSION = "0.5.23"
LABEL = SGLANG_LABEL  # the one column of claim verdicts of real code: there is no policy to choose


class SGLangImpl:
    """SGLang's Kimi-K3 multimodal code (one loaded version): the seam's `Impl`, plus `describe` and extras.

    ``gate_path`` picks the producer call site: ``"artifact"`` (SGLang's default for K3 while its
    preprocess cache is on: one gate call per image) or ``"request"`` (cache off or preprocessed
    inputs: one gate call per request; at the PR, before the artifact path existed, every request).
    None (the default): the tree's own default, the artifact path where it has one (`capabilities`).
    """

    real_code = True

    def __init__(self, spec: str | Source | None = None, *, gate_path: str | None = None) -> None:
        if gate_path is not None:
            _path(gate_path, "gate_path")
        if isinstance(spec, Source):
            self.source = spec
        else:
            self.source = load(spec or os.environ.get("DEFERLAB_SGLANG", DEFAULT_VERSION))
        self.capabilities = capabilities.of(self.source)
        self.gate_path = gate_path or self.capabilities.default_path
        self.name = self.source.name  # "sglang-0.5.23" (+g<rev> for a git checkout)
        self.has_deferred_path = self.source.has_deferred_path
        self._kip = self.source.module("multimodal.kimi_k3_image_processing") if self.has_deferred_path else None
        self._k25 = self.source.module("multimodal.processors.kimi_k25")
        self._pk3 = self.source.module("multimodal.processors.kimi_k3")

    def describe(self) -> dict[str, Any]:
        """What ran: the SGLang version, where it came from (and its commit), and every stand-in import."""
        return _describe(self.source, self.name)

    def _lacks(self, what: str, why: str) -> NotImplementedError:
        return NotImplementedError(f"{self.name} has no {what} ({why}); it is an eager-only Kimi-K3 release")

    # -- pipeline steps --------------------------------------------------------------------------------------------
    def to_chw_uint8(self, image: Any, *, promote_rgb_transparency: bool = False) -> Any:
        """SGLang's stager: ``to_chw_uint8``, or an eager-only release's ``_k3_to_cuda_chw`` (on the CPU).

        ``promote_rgb_transparency`` asks for the pre-PR rule; it runs only where this version's stager
        promotes a keyed RGB image (found by running it, `eager_promotes_rgb_key`), else it is refused.
        """
        if promote_rgb_transparency and not self.eager_promotes_rgb_key():
            raise NotImplementedError(
                f"{self.name} has no pre-PR eager staging path that promotes RGB images with a "
                "'transparency' key to RGBA (its stagers keep them RGB; found by running them)"
            )
        if not isinstance(image, (Image.Image, torch.Tensor)):
            raise TypeError(
                f"{self.name} to_chw_uint8 stages a PIL image or a torch tensor, got {type(image).__name__}"
            )
        if not self.has_deferred_path:
            return runtime.eager_stager(self.source, "cpu")(image)
        return self._kip.to_chw_uint8(image)

    def eager_promotes_rgb_key(self) -> bool:
        """Does the eager stager turn a 1x1 RGB image with a ``transparency`` key into 4 channels? (run it)"""
        probe = Image.new("RGB", (1, 1), (9, 9, 9))
        probe.info["transparency"] = (9, 9, 9)
        if self.has_deferred_path:  # its eager _k3_to_cuda_chw stages PIL images with to_chw_uint8(image, device)
            staged = self._pk3.to_chw_uint8(probe, device="cpu")
        else:
            staged = runtime.eager_stager(self.source, "cpu")(probe)
        return int(staged.shape[0]) == 4

    def resize(self, x: Array, out_h: int, out_w: int, device: str = "cpu") -> Any:
        t = torch.as_tensor(np.asarray(x), dtype=torch.float32, device=device)[None]
        return self._k25._resize_bicubic_if_needed(t, out_h, out_w)[0]

    def fill_transparent_bg(self, x: Array, background: Background, device: str = "cpu") -> Any:
        """``fill_transparent_bg``, or an eager-only release's ``_fill_transparent_bg`` (same signature)."""
        t = torch.as_tensor(np.asarray(x), dtype=torch.float32, device=device)[None]
        fill = self._kip.fill_transparent_bg if self.has_deferred_path else self._pk3._fill_transparent_bg
        as_dict = background if background is None or isinstance(background, Mapping) else background.to_dict()
        return fill(t, None if as_dict is None else dict(as_dict))[0]

    def normalization_tensors(self, mean: Sequence[float], std: Sequence[float], device: str = "cpu") -> Any:
        """(scale, bias), each float32 (1, 3, 1, 1): ``normalization_tensors``, or an eager-only release's
        wrapper's own ``_get_gpu_norm_tensors``."""
        if not self.has_deferred_path:
            return runtime.eager_norm_tensors(self.source, mean, std, device)
        return self._kip.normalization_tensors(list(mean), list(std), device)

    def normalize_and_patchify(
        self, x: Array, mean: Floats, std: Floats, patch_size: int, padded_h: int, padded_w: int, device: str = "cpu"
    ) -> Any:
        scale, bias = self.normalization_tensors(mean, std, device)
        t = torch.as_tensor(np.asarray(x), dtype=torch.float32, device=device)[None]
        return self._k25.normalize_and_patchify(t, scale, bias, patch_size, padded_h, padded_w)[0]

    def navit_resize_config(self, width: int, height: int, config: PreprocessConfig) -> dict[str, int]:
        """SGLang's ``navit_resize_config`` (a dict with the five upstream keys)."""
        return self._k25.navit_resize_config(
            width,
            height,
            config.patch_size,
            config.merge_kernel_size,
            config.in_patch_limit,
            config.patch_limit_on_one_side,
            config.fixed_output_tokens,
        )

    def preprocess(self, images: Images, config: Config, device: str = "cpu") -> tuple[Any, Any]:
        """SGLang's owner pipeline ``_gpu_preprocess_images`` with the hooks the consumer passes.

        ``to_chw`` is ``to_chw_uint8(image, device=device)`` and ``post_resize`` is ``fill_transparent_bg``
        with the config's background, exactly as ``KimiK3ForConditionalGeneration.get_image_feature``
        builds them; the NaViT decisions come from SGLang's ``navit_resize_config``.
        """
        sizes = [self._k25._get_image_dimensions(img) for img in images]
        rcs = [self.navit_resize_config(w, h, config) for w, h in sizes]
        scale, bias = self.normalization_tensors(config.image_mean, config.image_std, device)
        bg = config.transparent_bg_config
        if self.has_deferred_path:
            to_chw = functools.partial(self._kip.to_chw_uint8, device=device)
            fill = self._kip.fill_transparent_bg
        else:  # the eager wrapper's hooks (its _gpu_call), the only pipeline it has
            to_chw = runtime.eager_stager(self.source, device)
            fill = self._pk3._fill_transparent_bg
        return self._k25._gpu_preprocess_images(
            list(images), rcs, scale, bias, config.patch_size, to_chw=to_chw, post_resize=lambda x: fill(x, bg)
        )

    # -- tokenizer side ---------------------------------------------------------------------------------------------
    def gate_bytes(self, images: Images, config: Config) -> tuple[int, int]:
        """(raw, processed) bytes read off the real gate's locals when it returns (it does not return them)."""
        if not self.has_deferred_path:
            raise self._lacks("deferral gate", "KimiK3ImageProcessor has no _should_defer_gpu_preprocessing")
        proc = runtime.make_processor(self.source, config, "cpu")
        with runtime.gate_cuda(self.source, True):
            gate = type(proc)._should_defer_gpu_preprocessing.__get__(proc)
            _, seen = runtime.capture_locals(gate, ("raw_bytes", "processed_bytes"), list(images))
        if "raw_bytes" not in seen:
            if not images:
                return (0, 0)
            raise ValueError(
                f"{self.name}'s gate returned before counting bytes: an input is neither a PIL image nor a "
                "uint8 tensor, so it never computes a payload for these images"
            )
        return (int(seen["raw_bytes"]), int(seen["processed_bytes"]))

    def defer_decisions(
        self,
        images: Images,
        config: Config,
        *,
        policy: Any = None,
        transport: str = "cpu",
        cuda_available: bool = True,
        gate_path: str | None = None,
    ) -> list[bool]:
        """The real gate at call site ``gate_path`` (default: the one this driver was built with); a
        per-request call repeats its answer per image. An eager-only release has no gate: every image is
        preprocessed eagerly, so ``[False]`` per image (provenance says so)."""
        path = gate_path or self.gate_path
        if not self.has_deferred_path:
            _path(path, "gate path")
            return [False] * len(images)
        calls = producer.gate_calls(self.source, images, config, transport, cuda_available, path)
        decisions: list[bool] = []
        for call in calls:
            decisions += [call.result] * call.n_images
        if images and not calls:
            raise RuntimeError(f"{self.name}: the {path} call site never asked the gate")
        return decisions

    def process(
        self,
        images: Images,
        config: Config,
        *,
        policy: Any = None,
        transport: str = "cpu",
        epd: bool = False,
        device: str = "cpu",
        gate_path: str | None = None,
    ) -> producer.Produced:
        """SGLang's producer: ``.items`` are its own ``MultimodalDataItem``s, ``.deferred`` one bool per image.

        ``epd=True`` runs the EPD encoder's ``prepare_kimi_k3_encoder_inputs`` with GPU staging (the owner
        preprocesses; SGLang's EPD encoder has no gate: every image is deferred). An eager-only release runs
        its eager producer (`producer.eager_only_produce`) whatever ``gate_path`` says.
        """
        if not self.has_deferred_path:
            _path(gate_path or self.gate_path, "producer path")
            if epd:
                raise self._lacks("EPD producer", "kimi_k3_image_processing.prepare_kimi_k3_encoder_inputs is absent")
            return producer.eager_only_produce(self.source, images, config, transport, device)
        if epd:
            out = producer.epd_produce(self.source, images, config, "gpu")
            return producer.Produced(list(out.mm_items), [True] * len(out.mm_items), [], out)
        return producer.produce(self.source, images, config, transport, device, gate_path or self.gate_path)

    def epd_items(self, images: Images, config: Config, *, policy: Any = None, backend: str = "gpu") -> list[Any]:
        if not self.has_deferred_path:
            raise self._lacks("EPD producer", "kimi_k3_image_processing.prepare_kimi_k3_encoder_inputs is absent")
        return list(producer.epd_produce(self.source, images, config, backend).mm_items)

    def process_request(
        self, images: Images, config: Config, *, placeholders: int, policy: Any = None, transport: str = "cpu"
    ) -> producer.Produced:
        """SGLang's ``process_mm_data_async`` on a prompt of ``placeholders`` image tokens and ``images`` as the
        request's image data (`producer.request_produce`: the cache-off request path; an eager-only release's
        own entry); its ValueError when the counts differ."""
        return producer.request_produce(self.source, images, config, placeholders, transport, "cpu")

    # -- scheduler side ---------------------------------------------------------------------------------------------
    def deliver(self, items: Items, num_ranks: int, *, policy: Any = None) -> list[list[Any]]:
        return consumer.deliver(items, num_ranks)

    def materialize(
        self, items: Items, owner_indices: Sequence[int], config: Config, *, policy: Any = None, device: str = "cpu"
    ) -> Any:
        """The real loader on ``items[owner_indices]``; the tower's patch size is ``config.patch_size``.

        An owner of an EPD ``"cpu"`` backend item is refused: it runs the checkpoint's HF image processor."""
        if any(self._backend(items[i]) == "cpu" for i in owner_indices):
            raise NotImplementedError(
                f"{self.name}: the EPD 'cpu' backend's owner runs the checkpoint's own HF image processor, which "
                "SGLang does not ship; that consumer is not run here (its producer's keys are still checked)"
            )
        return consumer.materialize(self.source, items, owner_indices, device, _tower_patch(config))

    def _backend(self, item: Any) -> str | None:
        cfg = item.model_specific_data.get(self.source.deferred_key)
        if cfg is None:
            return None
        return cfg.get("backend") if isinstance(cfg, dict) else getattr(cfg, "backend", None)

    def vision_dp(
        self, items: Items, num_ranks: int, config: Config, *, policy: Any = None, device: str = "cpu"
    ) -> Any:
        return consumer.vision_dp(self.source, items, num_ranks, device, _tower_patch(config))

    def vision_dp_embeddings(
        self, features: Any, grids: Any, num_ranks: int, tower: Any, *, rope_type: str = "rope_2d",
        pool_temporal_dimension: bool = True, whole: bool = False, device: str = "cpu",
    ) -> list[Any]:  # fmt: skip
        """Each rank's return of SGLang's ``run_dp_sharded_mrope_vision_model`` run whole with ``tower``
        (`impl.sglang.vision_dp`: one thread per rank, the group's collectives through a barrier)."""
        return vision_dp.run_sharded(
            self.source, features, grids, num_ranks, tower, rope_type=rope_type,
            pool_temporal_dimension=pool_temporal_dimension, whole=whole, device=device,
        )  # fmt: skip

    # -- facts, each measured by running SGLang's code ----------------------------------------------------------
    @cached_property
    def _gate_paths(self) -> list[tuple[str, bool]]:
        """Each call site the loaded code has, measured with a two-image request: one gate call per image
        means it decides per image.

        Only sites whose method exists and calls the gate (`capabilities`): the artifact path first where
        it exists, then the request path. A version without the deferred path has no gate and one eager
        path, named after the call site it resembles: ``[("request", False)]`` (claims that need a gate
        record ``n/a`` through `defers`).
        """
        if not self.defers(None):
            return [("request", False)]
        two = [torch.zeros((3, 32, 32), dtype=torch.uint8), torch.zeros((3, 28, 20), dtype=torch.uint8)]
        sites = []
        for path in self.capabilities.paths:
            calls = producer.gate_calls(self.source, two, profile("kimi-k3"), "cpu", True, path)
            sites.append((path, len(calls) == 2 and all(c.n_images == 1 for c in calls)))
        if not sites:
            raise RuntimeError(f"{self.name}: the deferred path is present but no call site calls the gate")
        return sites

    def gate_paths(self, policy: Any) -> list[tuple[str, bool]]:
        return list(self._gate_paths)

    def defers(self, policy: Any) -> bool:
        """Whether this version has the owner-deferred path, as read off the loaded code."""
        return bool(self.has_deferred_path)

    def has_epd(self, policy: Any) -> bool:
        return bool(self.capabilities.epd_producer)

    def skip_pre_embed(self, policy: Any) -> bool:
        return bool(self.can_skip_pre_embed("KimiK3ForConditionalGeneration"))

    def ack_counts(self, policy: Any) -> list[Any]:
        """The real count sources, one per transport pool the version has (CUDA IPC and VMM declare K_p
        differently; 0.5.17 has only its CUDA IPC counter pool)."""
        every = self.ack_source("all")
        return [every.for_transport(t) for t in every.transports]

    # -- extras ----------------------------------------------------------------------------------------------------
    def assign_owners(self, sizes: Sequence[int], num_ranks: int) -> list[list[int]]:
        return consumer.assign_owners(self.source, sizes, num_ranks)

    def local_item_indices(self, sizes: Sequence[int], rank: int, world_size: int) -> list[int] | None:
        return consumer.local_item_indices(self.source, sizes, rank, world_size)

    def can_skip_pre_embed(self, model_class_name: str) -> bool:
        return consumer.can_skip_pre_embed(self.source, model_class_name)

    def skips_pre_embed_move(self, fn: Any, policy: Any = None) -> bool:
        return consumer.skips_pre_embed_move(self.source, fn)

    def ipc_counts(self) -> IPCCounts:
        return IPCCounts(self.source)

    def ack_source(self, transport: str = "cuda_ipc") -> SGLangAckCounts:
        """This version's counts and ack words as the simulator's ``AckCounts`` source (``"all"``: both pools)."""
        return SGLangAckCounts(IPCCounts(self.source), transport)

    def features(self) -> dict[str, Any]:
        """What this version has, found by running it (`features.detect`)."""
        return features.detect(self)

    @cached_property
    def _provenance(self) -> dict[str, str]:
        return provenance.per_method(self)

    def provenance(self) -> dict[str, str]:
        """Seam method -> where its answer comes from (`provenance.per_method`; per function: `provenance.of`)."""
        return dict(self._provenance)


def _path(path: str, what: str) -> str:
    """``path`` if it names a producer call site (`producer.PATHS`), else ValueError saying ``what`` it was."""
    if path not in producer.PATHS:
        raise ValueError(f"{what} must be one of {producer.PATHS}, got {path!r}")
    return path


def _tower_patch(config: PreprocessConfig) -> int:
    """The vision tower's patch side comes from the checkpoint config, never from the items."""
    if not isinstance(config, PreprocessConfig):
        raise InputTypeError(
            f"config must be the checkpoint's reference.system.config.PreprocessConfig, got {type(config).__name__}"
        )
    return config.patch_size
