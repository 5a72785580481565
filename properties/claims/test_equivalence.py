"""Property 1: the NumPy oracle (``reference``) and the implementation agree at every stage.

Stage by stage, each stage fed the implementation's own previous output, so a
difference is pinned to the stage that made it: staging bitwise; resize
bitwise or every differing element exactly one level within the float32
error bound of a .5 tie (`reference.oracle.resample.classify_disagreement` with
`tie_epsilon` for the actual sizes); compositing bitwise with the device's
``A / 255`` arithmetic; pad + normalize + patchify bitwise with one
consistent multiply-add form (fused: torch CPU's vectorized ``addcmul``
rounds once on FMA hardware; unfused otherwise); the BF16 cast bitwise, both
torch's cast of those patches and the owner's own cast in ``materialize``
(eager and deferred) against `reference.oracle.numerics.to_bf16`; and the
implementation's whole pipeline equals the chain of its stages.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from hypothesis import HealthCheck, example, given, settings, target
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context
from PIL import Image

from deferlab.properties import seam
from deferlab.properties import strategies as s
from deferlab.reference.oracle.background import fill_transparent_bg
from deferlab.reference.oracle.navit import resize_config
from deferlab.reference.oracle.normalize import normalize_scale_bias, pad_bottom_right, patchify, scale_bias
from deferlab.reference.oracle.numerics import bf16_bits, to_bf16
from deferlab.reference.oracle.resample import classify_disagreement, resize_bicubic_aa, tie_epsilon
from deferlab.reference.oracle.stage import to_chw_uint8
from deferlab.reference.system.config import BackgroundConfig, PreprocessConfig

BG = BackgroundConfig(pattern="chessboard", square_size=2, gray_value=180)
PINNED = PreprocessConfig(patch_size=2, merge_kernel_size=2, in_patch_limit=6, patch_limit_on_one_side=3, background=BG)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.ascontiguousarray(a, dtype=np.float32), np.ascontiguousarray(b, dtype=np.float32)
    return a.shape == b.shape and bool((a.view(np.uint32) == b.view(np.uint32)).all())


def normalize_forms(x: np.ndarray, config: PreprocessConfig, padded_h: int, padded_w: int) -> list[np.ndarray]:
    """The oracle's patches for both multiply-add forms: [fused, unfused]."""
    scale, bias = scale_bias(config.image_mean, config.image_std)
    padded = pad_bottom_right(x, padded_h, padded_w)
    return [patchify(normalize_scale_bias(padded, scale, bias, fused=f), config.patch_size) for f in (True, False)]


def check_stages(impl: seam.Impl, config: PreprocessConfig, image: Any, device: str = "cpu") -> None:
    """Reference == impl at every stage (see the module docstring for what "==" means per stage)."""
    staged = to_chw_uint8(image, max_pixels=config.max_pixels)
    got = seam.to_numpy(impl.to_chw_uint8(image))
    assert got.dtype == np.uint8 and np.array_equal(got, staged), f"staging: impl {got.shape} != oracle {staged.shape}"
    c, h, w = staged.shape
    rc = resize_config(w, h, config)
    pixels = staged.astype(np.float32)
    if (h, w) != (rc.new_height, rc.new_width):
        ref = resize_bicubic_aa(pixels, rc.new_height, rc.new_width)
        out = seam.to_numpy(impl.resize(pixels, rc.new_height, rc.new_width, device)).astype(np.float32)
        eps = tie_epsilon(h, rc.new_height, w, rc.new_width)
        explained = classify_disagreement(ref, out, epsilon=eps)
        ties = int((out != ref.values).sum())
        if currently_in_test_context():
            target(float(ties), label="resize elements that differ by an explained tie")
        assert explained.all(), (
            f"resize {h}x{w}->{rc.new_height}x{rc.new_width}: {int((~explained).sum())} unexplained differences, "
            f"max |diff| {float(np.abs(out - ref.values).max())}"
        )
        pixels = out
    arithmetic = "cuda" if device.startswith("cuda") else "cpu"
    composited = fill_transparent_bg(pixels, config.background, arithmetic=arithmetic)
    got_c = seam.to_numpy(impl.fill_transparent_bg(pixels, config.background, device)).astype(np.float32)
    assert same_bits(got_c, composited), f"composite ({c} channels, bg {config.background}) differs"
    forms = normalize_forms(composited, config, rc.padded_height, rc.padded_width)
    got_p = seam.to_numpy(
        impl.normalize_and_patchify(
            composited,
            config.image_mean,
            config.image_std,
            config.patch_size,
            rc.padded_height,
            rc.padded_width,
            device,
        )
    )
    form = next((f for f in forms if same_bits(got_p, f)), None)
    assert form is not None, "pad/normalize/patchify matches neither the fused nor unfused form"
    bf16 = torch.from_numpy(np.ascontiguousarray(got_p, dtype=np.float32)).to(torch.bfloat16)
    want_bits = bf16_bits(np.ascontiguousarray(got_p, dtype=np.float32))
    assert np.array_equal(bf16.view(torch.int16).numpy().view(np.uint16), want_bits), "BF16 cast differs"
    whole, grids = impl.preprocess([image], config, device=device)
    assert same_bits(seam.to_numpy(whole), got_p), "impl.preprocess != the chain of its own stages"
    assert seam.to_numpy(grids).tolist() == [list(rc.grid_thw)], f"grid {seam.to_numpy(grids).tolist()}"
    check_materialized_bf16(impl, config, image, to_bf16(form), device)


def check_materialized_bf16(
    impl: seam.Impl, config: PreprocessConfig, image: Any, want: np.ndarray, device: str
) -> None:
    """The owner's own BF16 cast (``materialize``), eager and deferred, is the oracle's float32 patches to BF16.

    ``want`` is `to_bf16` of the oracle's patches computed from the
    implementation's resize output, so a resize tie is already explained at
    the resize stage and every element here must match bit for bit.
    """
    for transport in ("cuda_ipc", "cpu"):  # eager on the producer, then deferred wherever the gate defers
        out = impl.process([image], config, policy="RELEASED", transport=transport, device=device)
        got = np.ascontiguousarray(
            seam.to_numpy(impl.materialize(out.items, [0], config, policy="RELEASED", device=device))
        )
        assert got.size == want.size, f"{transport}: materialized {got.shape}, the oracle has {want.shape}"
        bad = got.reshape(-1).view(np.uint32) != np.ascontiguousarray(want, dtype=np.float32).reshape(-1).view(
            np.uint32
        )
        assert not bad.any(), f"{transport} (deferred={out.deferred}): {int(bad.sum())} BF16 elements differ"


def equivalence_inputs() -> st.SearchStrategy[tuple[PreprocessConfig, Any]]:
    """A pixel config and one small image the oracle stages: PIL in every convertible mode, or a CHW tensor."""
    return st.tuples(s.pixel_configs(), s.staging_ok_pil_images(max_side=14) | s.chw_uint8_tensors(max_side=14))


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(req=equivalence_inputs())
@example(req=(PINNED, Image.new("RGBA", (7, 5), (250, 3, 128, 90))))
@example(req=(PINNED, torch.arange(3 * 9 * 11, dtype=torch.int64).remainder(256).to(torch.uint8).reshape(3, 9, 11)))
def test_reference_equals_impl_at_every_stage(impl, device, req):
    """Oracle and implementation agree at every stage: bitwise, or a resize element is an explained tie."""
    config, image = req
    check_stages(impl, config, image, device)
