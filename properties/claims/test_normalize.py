"""Property 7: the two normalization forms over drawn configs, in FP32 and after BF16 (claim C3).

The PR replaced the eager per-pixel ``(x / 255 - mean) / std`` with
``x * scale + bias`` (scale = f32(1 / (255 std)), bias = f32(-mean / std))
and claims the two are "exactly" equal. They are different float32
expressions, so equality is a claim to test, not an assumption: every
difference must be within the forms' combined rounding error, and the BF16
cast must keep them at most one BF16 step apart.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from deferlab.properties import claimcheck, seam
from deferlab.properties import strategies as s
from deferlab.reference.oracle.normalize import normalize_checkpoint, normalize_eager, normalize_scale_bias, scale_bias
from deferlab.reference.oracle.numerics import bf16_bits, to_bf16

U32 = 2.0**-24  # float32 unit roundoff
SUBNORMAL_HALF_STEP = 2.0**-150  # a rounding's absolute error floor: half the smallest float32 subnormal
LEVELS = np.tile(np.arange(256, dtype=np.float32), (3, 1)).reshape(3, 16, 16)  # every uint8 level, per channel
K3_STATS = ((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))
CLIP_STATS = ((0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711))


def impl_normalized(impl: seam.Impl, mean, std) -> np.ndarray:
    """The implementation's normalized levels as (3, 16, 16): patch size 16 makes one patch of the image."""
    return seam.to_numpy(impl.normalize_and_patchify(LEVELS, mean, std, 16, 16, 16))[0].astype(np.float32)


def error_bound(mean, std) -> np.ndarray:
    """|scale/bias - eager| allowed per element: 8 roundings (relative, or absolute when subnormal), over std."""
    m = np.asarray(mean, dtype=np.float64).reshape(3, 1, 1)
    sd = np.asarray(std, dtype=np.float64).reshape(3, 1, 1)
    relative = U32 * (LEVELS.astype(np.float64) / 255.0 + np.abs(m) + np.abs(m / sd))
    return 8 * (relative + SUBNORMAL_HALF_STEP) / sd  # the absolute term covers roundings in the subnormal range


def bf16_gap_explained(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Whether |bf16(a) - bf16(b)| <= |a - b| + 2**-8 (|a| + |b|): the FP32 gap plus each value's BF16 rounding."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    gap = np.abs(to_bf16(a).astype(np.float64) - to_bf16(b).astype(np.float64))
    return gap <= np.abs(a64 - b64) + 2.0**-8 * (np.abs(a64) + np.abs(b64))


@given(stats=s.normalization_stats())
@example(stats=K3_STATS)
@example(stats=CLIP_STATS)
@example(stats=((1.572247290208362e-45, 0.0, 0.0), (0.125, 1.0, 1.0)))  # found by `thorough`: a subnormal mean
def test_scale_bias_stays_within_rounding_of_the_eager_formula(impl, stats):
    """scale/bias differs from (x/255 - mean)/std only within rounding error, in FP32 and after BF16."""
    mean, std = stats
    got = impl_normalized(impl, mean, std)
    eager = normalize_eager(LEVELS, mean, std)
    diff = np.abs(got.astype(np.float64) - eager.astype(np.float64))
    bound = error_bound(mean, std)
    assert (diff <= bound).all(), f"{int((diff > bound).sum())} elements beyond rounding, max {diff.max():.3g}"
    assert bf16_gap_explained(got, eager).all(), "after BF16 the forms differ by more than their rounding"


@given(stats=s.normalization_stats())
@example(stats=K3_STATS)
def test_impl_normalize_is_one_consistent_multiply_add_form(impl, stats):
    """The implementation's x*scale+bias equals the oracle's fused or unfused form, bit for bit, everywhere."""
    mean, std = stats
    got = impl_normalized(impl, mean, std)
    scale, bias = scale_bias(mean, std)
    forms = [normalize_scale_bias(LEVELS, scale, bias, fused=f) for f in (True, False)]
    assert any(np.array_equal(got.view(np.uint32), f.view(np.uint32)) for f in forms), "neither fused nor unfused"


def differing_levels(a: np.ndarray, b: np.ndarray) -> int:
    return int((a.view(np.uint32) != b.view(np.uint32)).any(axis=0).sum())


def c3_evidence(impl: seam.Impl) -> str:
    """How far from "exact" the claim is, for the K3 and CLIP statistics (levels of 256 that differ)."""
    parts = []
    for name, (mean, std) in (("0.5/0.5", K3_STATS), ("CLIP", CLIP_STATS)):
        got = impl_normalized(impl, mean, std)
        eager, ckpt = normalize_eager(LEVELS, mean, std), normalize_checkpoint(LEVELS, mean, std)
        bf = bf16_bits(got)
        parts.append(
            f"{name}: FP32 differs from the eager formula at {differing_levels(got, eager)}/256 levels "
            f"(checkpoint form: {differing_levels(got, ckpt)}/256); after BF16 "
            f"{int((bf != bf16_bits(eager)).any(axis=0).sum())}/256 vs eager, "
            f"{int((bf != bf16_bits(ckpt)).any(axis=0).sum())}/256 vs checkpoint"
        )
    bf16_case = claimcheck.find_counterexample(
        s.normalization_stats(), lambda st_: check_bf16_equal(impl, st_), expect="levels differ after BF16"
    )
    parts.append(
        "after BF16 over drawn mean/std: "
        + ("no difference found" if bf16_case is None else f"differs for {bf16_case.value}: {bf16_case.error}")
    )
    return "; ".join(parts)


def check_bf16_equal(impl: seam.Impl, stats: tuple) -> None:
    mean, std = stats
    got, eager = impl_normalized(impl, mean, std), normalize_eager(LEVELS, mean, std)
    n = int((bf16_bits(got) != bf16_bits(eager)).any(axis=0).sum())
    assert n == 0, f"{n} of 256 levels differ after BF16"


def check_exact(impl: seam.Impl, stats: tuple) -> None:
    """The claim as the PR states it: scale/bias equals the eager formula bit for bit in FP32."""
    mean, std = stats
    got, eager = impl_normalized(impl, mean, std), normalize_eager(LEVELS, mean, std)
    n = differing_levels(got, eager)
    assert n == 0, f"{n} of 256 levels differ in FP32 (mean {mean}, std {std})"


@pytest.mark.claim("C3")
def test_claim_c3_scale_bias_equals_eager(impl, policy):
    """C3: x*scale+bias equals (x/255 - mean)/std exactly (policy-independent arithmetic, recorded per policy)."""
    verdict = claimcheck.verify_claim(
        "C3",
        policy,
        s.normalization_stats() | st.just(K3_STATS),
        lambda stats: check_exact(impl, stats),
        pinned=[K3_STATS],
        evidence=lambda: c3_evidence(impl) + ".",
    )
    claimcheck.assert_expected("C3", policy, verdict)
