"""Pad, normalize and patchify (semantics §3.5), plus the two other normalization forms it is compared with.

* `normalize_scale_bias`: what the deferred owner runs, ``x * scale + bias``
  with float32 ``scale = 1/(255 std)``, ``bias = -mean/std`` (`scale_bias`).
  Unfused (a float32 multiply, then a float32 add: what the semantics's wording
  and a non-FMA build give) or fused (a single rounding: Triton's / nvcc's
  FMA, and, measured here, torch 2.13's CPU ``addcmul`` on FMA hardware).
  The default stays unfused so that callers must say which one they model.
* `normalize_eager`: the eager per-pixel form ``(x / 255 - mean) / std``, each
  a float32 op; the PR claims the scale/bias form equals it exactly.
* `normalize_checkpoint`: the HF checkpoint's NumPy form (semantics §11.3).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from deferlab.reference.system.errors import InputValueError
from deferlab.reference.system.validate import check_float_image, check_positive_int, check_vector3

_F32 = np.float32
_F64 = np.float64


def _per_channel(v: np.ndarray, ndim: int) -> np.ndarray:
    """(3,) -> shape broadcasting over the channel axis of a (C,H,W) or (B,C,H,W) array."""
    return v.reshape((3, 1, 1) if ndim == 3 else (1, 3, 1, 1))


def scale_bias(mean: Sequence[float], std: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """(scale, bias) float32[3]: ``1 / (255 * std)`` and ``-mean / std`` in Python doubles, then float32."""
    m = check_vector3("mean", mean)
    s = check_vector3("std", std, positive=True)
    scale = np.array([1.0 / (255.0 * sc) for sc in s], dtype=_F32)
    bias = np.array([-mc / sc for mc, sc in zip(m, s, strict=True)], dtype=_F32)
    return scale, bias


def pad_bottom_right(x: np.ndarray, padded_h: int, padded_w: int) -> np.ndarray:
    """Zero-pad the last two axes at the bottom and right to (padded_h, padded_w), in pixel space."""
    arr = check_float_image("x", x)
    padded_h, padded_w = check_positive_int("padded_h", padded_h), check_positive_int("padded_w", padded_w)
    h, w = arr.shape[-2:]
    if padded_h < h or padded_w < w:
        raise InputValueError(f"padded size ({padded_h}, {padded_w}) is smaller than the image ({h}, {w})")
    out = np.zeros(arr.shape[:-2] + (padded_h, padded_w), dtype=arr.dtype)
    out[..., :h, :w] = arr
    return out


def _fma_is_exact(scale: np.ndarray, bias: np.ndarray) -> bool:
    """Whether float64 holds ``x * scale + bias`` exactly for every integer x in [0, 255].

    x (8 bits) times a float32 scale (24 bits) is exact in 32 bits; the sum
    with the float32 bias is exact when its span, from the largest magnitude
    down to the lowest set bit of either term, fits 53 bits. For any plausible
    mean/std (|bias| ~ 1..100, scale ~ 1e-3..1e-1) the span is ~35 bits; a
    tiny (e.g. subnormal) bias next to a normal product is what breaks it.
    """
    s64, b64 = np.abs(scale.astype(_F64)), np.abs(bias.astype(_F64))
    lsb = np.where(s64 > 0, np.spacing(np.abs(scale)).astype(_F64), np.inf)
    lsb = np.minimum(lsb, np.where(b64 > 0, np.spacing(np.abs(bias)).astype(_F64), np.inf))
    top = np.maximum(b64, 255.0 * s64) * 2.0
    return bool(np.all((top == 0) | (top / lsb < 2.0**52)))


def _nearest_f32(q: Fraction) -> np.float32:
    """The float32 nearest to rational ``q``, ties to even (fixing up float()'s double rounding)."""
    guess = np.float32(float(q))
    cands = (np.nextafter(guess, _F32(-np.inf)), guess, np.nextafter(guess, _F32(np.inf)))
    finite = [c for c in cands if np.isfinite(c)]
    return min(finite, key=lambda c: (abs(Fraction(float(c)) - q), int(np.float32(c).view(np.uint32)) & 1))


def _fused_table(scale: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """(3, 256) float32: ``x * scale + bias`` rounded once, from exact rationals (the slow, always-exact path)."""
    table = np.empty((3, 256), dtype=_F32)
    for c in range(3):
        sc, bi = Fraction(float(scale[c])), Fraction(float(bias[c]))
        table[c] = [_nearest_f32(x * sc + bi) for x in range(256)]
    return table


def normalize_scale_bias(x: np.ndarray, scale: np.ndarray, bias: np.ndarray, *, fused: bool = False) -> np.ndarray:
    """``x * scale + bias`` per channel, float32: unfused (two roundings) or fused (one rounding).

    Fused needs integer-valued x in [0, 255] (what the pipeline feeds it;
    ValueError otherwise) and is computed in float64, rounded once to float32:
    that equals a true FMA because the float64 value is exact (see
    `_fma_is_exact`); for configs where it would not be, the 256 possible
    results per channel are derived from exact rationals instead.
    """
    arr = check_float_image("x", x, channels=(3,))
    scale = np.asarray(scale, dtype=_F32).reshape(3)
    bias = np.asarray(bias, dtype=_F32).reshape(3)
    sc, bi = _per_channel(scale, arr.ndim), _per_channel(bias, arr.ndim)
    if not fused:
        return arr.astype(_F32) * sc + bi
    if not _are_levels(arr):
        raise InputValueError("fused=True needs integer-valued x in [0, 255] (pixel levels), got other values")
    if _fma_is_exact(scale, bias):
        out = arr.astype(_F64)
        out *= sc.astype(_F64)
        out += bi.astype(_F64)
        return out.astype(_F32)
    table = _fused_table(scale, bias)
    idx = arr.astype(np.intp)
    channel = np.arange(3).reshape((3, 1, 1) if arr.ndim == 3 else (1, 3, 1, 1))
    return table[channel, idx]


def _are_levels(arr: np.ndarray) -> bool:
    """Every value an integer in [0, 255] (NaN is not), checked with reductions rather than full-size masks."""
    if arr.size == 0:
        return True
    lo, hi = arr.min(), arr.max()
    if not (lo >= 0 and hi <= 255):
        return False
    return arr.dtype.kind in "iu" or bool(np.array_equal(np.floor(arr), arr))


def normalize_levels_into(
    levels: np.ndarray, scale: np.ndarray, bias: np.ndarray, p: int, out: np.ndarray, *, fused: bool
) -> None:
    """Normalize and patchify (3, H, W) integer pixel levels straight into ``out`` (gh * gw, 3, p, p) float32.

    Bit-equal to ``patchify(normalize_scale_bias(levels, scale, bias,
    fused=fused), p)``: the same float32 operations (unfused), the same
    exact float64 sum rounded once (fused) or the same rational table, per
    element; only the order of the writes differs (the result lands in patch
    order directly, a few patch rows at a time, with no full-size temporary).
    ``levels`` must hold integers in [0, 255] (unchecked: the pipeline makes
    them); H and W must be multiples of ``p``.
    """
    scale = np.asarray(scale, dtype=_F32).reshape(3)
    bias = np.asarray(bias, dtype=_F32).reshape(3)
    _, h, w = levels.shape
    gh, gw = h // p, w // p
    grid = levels.reshape(3, gh, p, gw, p)
    dest = out.reshape(gh, gw, 3, p, p).transpose(2, 0, 3, 1, 4)  # (3, gh, p, gw, p) view of out
    exact = fused and _fma_is_exact(scale, bias)
    table = _fused_table(scale, bias) if fused and not exact else None
    step = max(1, (1 << 20) // max(1, p * w * 8))  # patch rows per chunk: about 1 MB of float64
    tmp = np.empty((min(step, max(gh, 1)), p, gw, p), dtype=_F64 if exact else _F32)
    for c in range(3):
        for g0 in range(0, gh, step):
            g1 = min(g0 + step, gh)
            src, dst, t = grid[c, g0:g1], dest[c, g0:g1], tmp[: g1 - g0]
            if table is not None:
                dst[...] = table[c][src.astype(np.intp)]
            elif exact:  # x * scale exact in float64, + bias exact too (_fma_is_exact): one rounding to float32
                np.multiply(src, _F64(scale[c]), out=t)
                np.add(t, _F64(bias[c]), out=dst)
            else:  # float32 multiply, then float32 add
                np.multiply(src, scale[c], out=t, dtype=_F32)
                np.add(t, bias[c], out=dst, dtype=_F32)


def normalize_eager(x: np.ndarray, mean: Sequence[float], std: Sequence[float]) -> np.ndarray:
    """``(x / 255 - mean) / std`` with every op in float32 (the eager torch form; mean/std as float32)."""
    arr = check_float_image("x", x, channels=(3,))
    m = _per_channel(np.asarray(check_vector3("mean", mean), dtype=_F32), arr.ndim)
    s = _per_channel(np.asarray(check_vector3("std", std, positive=True), dtype=_F32), arr.ndim)
    return (arr.astype(_F32) / _F32(255.0) - m) / s


def normalize_checkpoint(x: np.ndarray, mean: Sequence[float], std: Sequence[float]) -> np.ndarray:
    """The checkpoint's NumPy normalize (semantics §11.3): ``f32(f64(f32(f64(f32(u/255)) - mean)) * (1/std))``.

    ``u / 255.0`` in float64 cast to float32; ``x -= mean`` and ``x *= std_inv``
    on a float32 array with float64 operands compute in float64 and store float32.
    """
    arr = check_float_image("x", x, channels=(3,))
    m = _per_channel(np.asarray(check_vector3("mean", mean), dtype=_F64), arr.ndim)
    inv = _per_channel(1.0 / np.asarray(check_vector3("std", std, positive=True), dtype=_F64), arr.ndim)
    v = (arr.astype(_F64) / 255.0).astype(_F32)
    v = (v.astype(_F64) - m).astype(_F32)
    return (v.astype(_F64) * inv).astype(_F32)


def patchify(x: np.ndarray, p: int) -> np.ndarray:
    """(B, C, H, W) -> (B * gh * gw, C, p, p): patches in row-major grid order (gy, then gx), then c, py, px."""
    arr = check_float_image("x", x)
    p = check_positive_int("p", p)
    if arr.ndim == 3:
        arr = arr[None]
    b, c, h, w = arr.shape
    if h % p or w % p:
        raise InputValueError(f"image size ({h}, {w}) must be a multiple of the patch size {p}")
    gh, gw = h // p, w // p
    patches = arr.reshape(b, c, gh, p, gw, p).transpose(0, 2, 4, 1, 3, 5)
    return np.ascontiguousarray(patches).reshape(b * gh * gw, c, p, p)
