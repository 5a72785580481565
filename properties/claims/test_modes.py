"""Property 6: PIL modes and alpha (semantics §3.1, §3.4), claims C2 and C12.

Staging either succeeds with the channel count the gate counted and the
mode's true alpha semantics, or fails with a clear error before any work; a
fully transparent pixel ends exactly on the configured background, an opaque
one keeps its colour. "True alpha" is read here from the raw bands, palette
and ``transparency`` key (`true_alpha`), never from the systems under test.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from PIL import Image

from deferlab.properties import claimcheck, seam
from deferlab.properties import strategies as s
from deferlab.properties.claims.test_gate import keyed_palette
from deferlab.properties.strategies.images import GREY_LIKE
from deferlab.reference.oracle.modes import to_rgb
from deferlab.reference.oracle.stage import to_chw_uint8
from deferlab.reference.system.config import BackgroundConfig, PreprocessConfig
from deferlab.reference.system.contract import ACCEPTED_MODES

# Patch 1, merge 1, limits far above the images: no resize, no pad, one patch per pixel, so an output row
# is a pixel. mean 0 / std 1 keeps every level distinct in FP32 (x * f32(1/255)).
IDENTITY_GEOMETRY = dict(patch_size=1, merge_kernel_size=1, in_patch_limit=4096, patch_limit_on_one_side=64)
POLICIES = ["PR_33921", "RELEASED", "HARDENED"]
KEYED_GREY = ("1", "L", "I", "I;16")  # the grey modes whose key Pillow turns into alpha (the others ignore it)


def keyed_grey(mode: str, values: list[int], key: object) -> Image.Image:
    """A 1-row grey image of ``mode`` with these pixel values and ``transparency`` key."""
    image = Image.new(mode, (len(values), 1))
    image.putdata(values)
    image.info["transparency"] = key
    return image


def grey_key(key: object) -> int | None:
    """The grey level Pillow keys on: an int, or a 3-tuple's first element; None where Pillow refuses the key."""
    if isinstance(key, tuple) and len(key) == 3:
        key = key[0]
    return int(key) if isinstance(key, int) and not isinstance(key, bool) else None


def eight_bit_grey(image: Image.Image) -> np.ndarray:
    """(H, W) levels Pillow compares a grey key with: 1 -> 0/255, I clipped to 0..255, I;16 saturated at 255."""
    values = np.asarray(image).astype(np.int64)
    if image.mode == "1":
        return values * 255
    return np.clip(values, 0, 255)  # I;16*: a non-zero high byte saturates to 255, else the low byte


def true_alpha(image: Image.Image) -> np.ndarray | None:
    """The alpha a viewer would see, (H, W) uint8, or None when the mode has no alpha to speak of.

    Alpha bands ("A", or premultiplied "a") carry it; a P image's alpha table
    (bytes, entries past its end opaque) or transparent index (int); a
    1 / L / I / I;16 colour key (an int, or a 3-tuple whose first element
    counts), compared as Pillow does: the image's 8-bit grey level against the
    key's low byte (`test_true_alpha_is_pillows_for_keyed_grey_images`; Pillow
    ignores the key of I;16L / I;16B / I;16N when it converts to RGBA). An RGB
    colour key is deliberately not alpha (C2: never promoted), and a key
    anywhere else, or of a form Pillow refuses, means nothing.
    """
    bands = image.getbands()
    if bands[-1] in ("A", "a") and image.mode != "LAB":
        return np.asarray(image.getchannel(len(bands) - 1), dtype=np.uint8)
    key = image.info.get("transparency")
    if key is None:
        return None
    if image.mode == "P":
        idx = np.asarray(image, dtype=np.int64)
        if isinstance(key, bytes):
            table = np.full(256, 255, dtype=np.uint8)
            table[: len(key)] = np.frombuffer(key, dtype=np.uint8)[:256]
            return table[idx]
        if isinstance(key, int):
            return np.where(idx == key, 0, 255).astype(np.uint8)
        return None
    level = grey_key(key) if image.mode in KEYED_GREY else None
    if level is None:
        return None
    return np.where(eight_bit_grey(image) == (level & 0xFF), 0, 255).astype(np.uint8)


@given(image=s.pil_images(modes=GREY_LIKE, max_side=6))
@example(image=keyed_grey("I;16", [300, 44], 300))  # saturated 300 -> 255 is not the key's low byte 44
@example(image=keyed_grey("I;16", [256, 0], 255))  # 256 saturates to 255, which is the key
@example(image=keyed_grey("I", [-5, 300], 0))  # I clips: -5 -> 0 is the key
@example(image=keyed_grey("L", [0, 1], (1, 0, 0)))  # a tuple key counts by its first element
@example(image=keyed_grey("I;16L", [0], 0))  # Pillow ignores the key of the explicit-endian I;16 modes
def test_true_alpha_is_pillows_for_keyed_grey_images(image):
    """Our reading of a grey colour key equals the alpha Pillow itself gives when it converts to RGBA."""
    alpha = true_alpha(image)
    try:
        pillow = np.asarray(image.convert("RGBA"))[..., 3]
    except (TypeError, ValueError):  # Pillow refuses this key (or this mode): then it is no alpha
        assert alpha is None or grey_key(image.info.get("transparency")) is None, f"{image.mode} refused by Pillow"
        return
    if alpha is None:
        assert (pillow == 255).all(), f"{image.mode} key {image.info.get('transparency')!r}: Pillow sees alpha"
    else:
        assert np.array_equal(alpha, pillow), f"{image.mode} key {image.info['transparency']!r}: {alpha} != {pillow}"


def background_levels(bg: BackgroundConfig, h: int, w: int) -> np.ndarray:
    """(H, W) background level per semantics §3.4, written from the semantics's words."""
    if bg.pattern != "chessboard":
        return np.full((h, w), {"white": 255, "black": 0, "gray": 128}[bg.pattern], dtype=np.float32)
    y, x = np.mgrid[0:h, 0:w]
    gray_cells = (y // bg.square_size + x // bg.square_size) % 2 == (1 if bg.square_on_top_left else 0)
    return np.where(gray_cells, bg.gray_value, bg.white_value).astype(np.float32)


def identity_config(image: Image.Image, bg: BackgroundConfig | None) -> PreprocessConfig:
    """Patch 1, merge 1 and limits above the image: no resize, no pad, one output row per pixel."""
    w, h = image.size
    geometry = dict(IDENTITY_GEOMETRY, in_patch_limit=max(4096, w * h), patch_limit_on_one_side=max(64, w, h))
    return PreprocessConfig(**geometry, image_mean=(0, 0, 0), image_std=(1, 1, 1), background=bg)


def levels_of(features: np.ndarray, image: Image.Image) -> np.ndarray:
    """(H, W, 3) integer levels read back exactly from FP32 patches of `identity_config` (x * f32(1/255))."""
    feats = features.reshape(-1, 3).astype(np.float32)
    w, h = image.size
    levels = np.arange(256, dtype=np.float32) * np.float32(1.0 / 255.0)  # the f32 value each level becomes
    idx = np.clip(np.searchsorted(levels, feats), 0, 255)
    assert (levels[idx] == feats).all(), "output values are not normalized integer levels"
    return idx.reshape(h, w, 3).astype(np.float32)


def check_alpha_semantics(impl: seam.Impl, policy: str, image: Image.Image, bg: BackgroundConfig) -> None:
    """Rejected clearly (naming the input), or transparent pixels land on bg and opaque ones keep colour."""
    try:
        item = impl.process([image], identity_config(image, bg), policy=policy, transport="cuda_ipc").items[0]
    except (ValueError, TypeError) as e:
        if "images[0]" in str(e):
            return
        raise AssertionError(f"unclear staging error for mode {image.mode}: {type(e).__name__}: {e}") from e
    got = levels_of(seam.to_numpy(item.feature), image)
    alpha = true_alpha(image)
    if alpha is None:
        return
    h, w = alpha.shape
    back = background_levels(bg, h, w)
    clear = alpha == 0
    assert (got[clear] == back[clear][:, None]).all(), f"{image.mode}: a fully transparent pixel is not background"
    opaque = alpha == 255
    if opaque.any() and image.mode in ("LA", "PA", "RGBA", "P", "L", "1"):
        plain = image.copy()  # an opaque pixel's colour does not depend on the key (and Pillow's RGB
        plain.info.pop("transparency", None)  # conversion refuses a tuple key on L, which RGBA accepts)
        colour = to_rgb(plain).astype(np.float32)
        assert (got[opaque] == colour[opaque]).all(), f"{image.mode}: an opaque pixel changed colour"


def alpha_inputs() -> st.SearchStrategy[tuple[Image.Image, BackgroundConfig]]:
    return st.tuples(s.pil_images(max_side=6), s.backgrounds(allow_none=False))


def alpha_kind(req: tuple[Image.Image, BackgroundConfig]) -> str:
    """C12's partition: the mode and where its alpha lives (a band, a transparency key of which type, none)."""
    image = req[0]
    key = image.info.get("transparency")
    if image.mode in ("LA", "La", "PA", "RGBA", "RGBa"):
        where = "alpha band"
    elif key is not None:
        where = f"key ({type(key).__name__})"
    else:
        where = "no alpha"
    return f"{image.mode}, {where}"


@pytest.mark.claim("C12")
def test_claim_c12_alpha_semantics(impl, policy):
    """C12: every PIL mode keeps its true alpha through staging and compositing, or is rejected clearly."""
    bg = BackgroundConfig(pattern="white")
    pinned = [
        (Image.frombytes("RGBa", (1, 1), bytes([10, 20, 30, 0])), bg),  # alpha 0 hidden by the lower-case band
        (Image.new("La", (1, 1)), bg),  # no converter: an unclear PIL error
        (
            keyed_palette((0, 0, 0)),
            bg,
        ),  # a tuple key on a P image: Pillow raises naming no input; HARDENED rejects it first
        # A grey key that is neither an int nor a 3-tuple: Pillow's RGBA conversion raises a TypeError naming no
        # input (semantics §3.1; found by the dev profile's search, which the ci search stops short of).
        (keyed_grey("L", [0], (0,)), bg),  # "argument 2 must be sequence of length 3, not 1"
        (keyed_grey("L", [0], b"\x00"), bg),  # "argument 2 must be 3-item sequence, not bytes"
        (keyed_grey("1", [0], (0,)), bg),  # the same on each keyed grey mode (its own signature: the partition)
        (keyed_grey("I", [0], b"\x00"), bg),
        (keyed_grey("I;16", [0], (0, 0, 0, 0, 0)), bg),  # "... not 5"
    ]
    verdict = claimcheck.verify_claim(
        "C12",
        policy,
        alpha_inputs(),
        lambda req: check_alpha_semantics(impl, policy, *req),
        pinned=pinned,
        partition=alpha_kind,
    )
    claimcheck.assert_expected("C12", policy, verdict)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(req=st.tuples(s.staging_ok_pil_images(max_side=6, modes=ACCEPTED_MODES), s.backgrounds(allow_none=False)))
@example(req=(Image.frombytes("LA", (2, 1), bytes([7, 0, 200, 255])), BackgroundConfig(pattern="gray")))
def test_alpha_semantics_for_upstream_modes(impl, req):
    """For the modes and keys upstream stages faithfully, transparent pixels end on bg, opaque keep colour."""
    image, bg = req
    check_alpha_semantics(impl, "RELEASED", image, bg)


@given(image=s.staging_ok_pil_images(max_side=8))
def test_staged_channels_are_the_gate_count_and_the_oracle_pixels(impl, image):
    """Staging gives the channel count the gate counted, and the oracle's pixels bit for bit."""
    staged = seam.to_numpy(impl.to_chw_uint8(image))
    raw, _ = impl.gate_bytes([image], PreprocessConfig(**IDENTITY_GEOMETRY))
    w, h = image.size
    assert staged.shape == (raw // (w * h), h, w), f"staged {staged.shape}, gate counted {raw // (w * h)} channels"
    assert np.array_equal(staged, to_chw_uint8(image)), f"{image.mode}: staged pixels differ from the oracle"


# --- C2: RGB with a stray transparency key ------------------------------------------------------------------------


@st.composite
def keyed_rgb(draw: st.DrawFn) -> Image.Image:
    """An RGB image whose `transparency` tuple equals one of its own pixels (so promotion would show)."""
    image = draw(s.pil_images(modes=("RGB",), max_side=5, transparency=False))
    pixels = np.asarray(image).reshape(-1, 3)
    image.info["transparency"] = tuple(int(v) for v in pixels[draw(st.integers(0, len(pixels) - 1))])
    return image


def check_not_promoted(impl: seam.Impl, policy: str, image: Image.Image) -> None:
    """With or without its key, an RGB image stages to 3 channels and gives the same features on both paths."""
    plain = image.copy()
    plain.info.pop("transparency", None)
    bg = BackgroundConfig(pattern="chessboard", square_size=1, gray_value=180)
    assert seam.to_numpy(impl.to_chw_uint8(image)).shape[0] == 3
    for transport in ("cuda_ipc", "cpu"):  # eager, then (where the policy defers) deferred
        config = PreprocessConfig(**IDENTITY_GEOMETRY, background=bg)
        keyed = impl.process([image], config, policy=policy, transport=transport)
        base = impl.process([plain], config, policy=policy, transport=transport)
        a = seam.to_numpy(impl.materialize(keyed.items, [0], config, policy=policy))
        b = seam.to_numpy(impl.materialize(base.items, [0], config, policy=policy))
        assert np.array_equal(a, b), f"{transport}: the transparency key {image.info['transparency']} changed output"


@pytest.mark.claim("C2")
def test_claim_c2_rgb_transparency_not_promoted(impl, policy):
    """C2: an RGB image with a stray transparency key is never promoted to RGBA, on either path."""
    pinned_img = Image.frombytes("RGB", (2, 1), bytes([9, 9, 9, 200, 100, 50]))
    pinned_img.info["transparency"] = (9, 9, 9)
    verdict = claimcheck.verify_claim(
        "C2", policy, keyed_rgb(), lambda img: check_not_promoted(impl, policy, img), pinned=[pinned_img]
    )
    claimcheck.assert_expected("C2", policy, verdict)
