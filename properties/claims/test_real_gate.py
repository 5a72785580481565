"""The gate's refusals (``real_code``): what it must never defer, and where its channel count decides, on the model
and under ``--sglang`` alike (semantics §4; the facts in §17.2).

Why: the claims ask the gate with the transport literal "cpu", uint8 images
and sizes far from its byte boundary, so three of its guards ran under no
claim that could see them change (a mutation campaign's survivors; the
request's and the owner's refusals are `test_real_contract`'s):

* the gate defers only under the CPU transport, whatever object spells "cpu"
  (a value parsed from the command line is not the interned literal: ``!=``
  read as ``is not`` never deferred there), never under another transport, and
  never a request holding a tensor that is not uint8 (``and`` read as ``or``
  let a float tensor through);
* at the sizes where three and four channels fall on either side of the
  processed bytes, every PIL mode is gated as the oracle counts its channels
  (``mode != "RGB"`` read as ``>=`` or ``<`` counted some alpha modes as 3).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st
from PIL import Image

from deferlab.properties.claims.real_support import K3, SETTINGS, tiny
from deferlab.reference.oracle import gate as gate_oracle
from deferlab.reference.oracle.navit import resize_config
from deferlab.reference.system.config import PreprocessConfig
from deferlab.reference.system.contract import TRANSPORTS

pytestmark = pytest.mark.real_code


# -- 1. the gate: the CPU transport however it is spelled, and uint8 pixels only ---------------------------------------


def fresh(text: str) -> str:
    """An equal string that is not the interned literal (as a value parsed from argv or a config file is)."""
    out = "".join(list(text))
    assert out == text and out is not text
    return out


@pytest.mark.policies("PR_33921", "RELEASED", "HARDENED")
@SETTINGS
@given(sizes=st.lists(st.tuples(st.integers(1, 6), st.integers(1, 6)), min_size=1, max_size=3))
@example(sizes=[(2, 3)])
def test_the_gate_defers_under_the_cpu_transport_only_however_it_is_spelled(impl, policy, sizes):
    """Small images defer under K3's limits with the transport "cpu", the same when the string is a fresh object,
    and never under any other transport the contract names (semantics §4: CUDA IPC, fabric)."""
    if not impl.defers(policy):
        pytest.skip("no deferred path here (an eager-only release): there is no gate to ask")
    images = [tiny(h, w, i) for i, (h, w) in enumerate(sizes)]
    want = impl.defer_decisions(images, K3, policy=policy, transport="cpu")
    assert all(want), f"{sizes}: small images under K3's limits do not defer: {want}"
    assert impl.defer_decisions(images, K3, policy=policy, transport=fresh("cpu")) == want, "a fresh 'cpu' differs"
    for transport in (t for t in TRANSPORTS if t != "cpu"):
        got = impl.defer_decisions(images, K3, policy=policy, transport=transport)
        assert not any(got), f"{sizes}: deferred under {transport}: {got}"


@pytest.mark.policies("PR_33921", "RELEASED", "HARDENED")
@SETTINGS
@given(
    sizes=st.lists(st.tuples(st.integers(1, 6), st.integers(1, 6)), min_size=1, max_size=3),
    which=st.integers(0, 2),
    dtype=st.sampled_from([torch.float32, torch.int16, torch.float16, torch.int32]),
)
@example(sizes=[(2, 3)], which=0, dtype=torch.float32)
def test_a_request_holding_a_tensor_that_is_not_uint8_is_never_deferred(impl, policy, sizes, which, dtype):
    """The gate defers raw uint8 pixels (or PIL images) only: a tensor of another dtype is never deferred (a gate
    asked per request keeps the whole request eager, one asked per image that image)."""
    images = [tiny(h, w, i) for i, (h, w) in enumerate(sizes)]
    images[which % len(images)] = images[which % len(images)].to(dtype)
    got = impl.defer_decisions(images, K3, policy=policy)
    assert not got[which % len(images)], f"{sizes}: the {dtype} tensor (image {which % len(images)}) deferred: {got}"


# -- 2. the gate's channel count decides at the byte boundary ---------------------------------------------------------

BAND = PreprocessConfig(patch_size=2, merge_kernel_size=2, in_patch_limit=4, patch_limit_on_one_side=16)


def _in_band(w: int, h: int) -> bool:
    """c * w * h <= processed bytes < (c + 1) * w * h for c 2, 3 or 4: the channel count alone decides the gate
    (pixel-free; c = 4 also tells four channels from five)."""
    rc = resize_config(w, h, BAND)
    processed = 3 * rc.padded_width * rc.padded_height * 4
    return any(c * w * h <= processed < (c + 1) * w * h for c in (2, 3, 4))


BAND_SIZES = [(w, h) for w in range(1, 30) for h in range(1, 30) if _in_band(w, h)]
MODES = (
    "RGB",
    "RGBA",
    "RGB+transparency",
    "LA",
    "PA",
    "P+transparency",
    "L",
    "L+transparency",
    "CMYK",
    "1",
    "I",
)  # La: Pillow cannot convert it (C11)


def mode_image(mode: str, w: int, h: int) -> Image.Image:
    """A ``w`` x ``h`` image of ``mode`` ("X+transparency": mode X with a transparency key)."""
    base, keyed = mode.split("+")[0], mode.endswith("+transparency")
    image = Image.new(base, (w, h))
    if keyed:
        image.info["transparency"] = 0
    return image


@pytest.mark.policies("PR_33921", "RELEASED", "HARDENED")
@SETTINGS
@given(size=st.sampled_from(BAND_SIZES), mode=st.sampled_from(MODES))
@example(size=(7, 7), mode="LA")  # sorts below "RGB", has alpha: 4 channels
@example(size=(7, 7), mode="RGBA")  # sorts above "RGB"
@example(size=(7, 7), mode="RGB")
@example(size=(7, 7), mode="RGB+transparency")  # RGB: 3 channels even with a transparency key
@example(size=(5, 16), mode="RGBA")  # 4 channels defer here, 5 would not
@example(size=(6, 22), mode="RGB")  # 3 channels stay eager here, 2 would defer
def test_at_the_byte_boundary_every_mode_is_gated_as_its_channels_count(impl, policy, size, mode):
    """Where the channel count alone decides, an image defers iff the oracle's count for its mode says so."""
    if not impl.defers(policy):
        pytest.skip("no deferred path here (an eager-only release): there is no gate to ask")
    image = mode_image(mode, *size)
    want = gate_oracle.should_defer([image], BAND)
    got = impl.defer_decisions([image], BAND, policy=policy)
    assert got == [want], f"{mode} {size[0]}x{size[1]}: decided {got}, the oracle {want} ({gate_oracle.payload([image], BAND)[0]})"  # fmt: skip
