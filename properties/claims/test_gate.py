"""Property 3, the deferral gate (semantics §4), and claims C1, C10, C11.

The truth is computed here from the image's TRUE dimensions and channels (the
strategies know them) and the reference NaViT decision, never from the
implementation's own helpers. Big sizes use zero-stride uint8 tensors
(``expand``): the gate reads only shape and dtype, so an 8192 x 8192 image
costs nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import example, given, target
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context
from PIL import Image

from deferlab.properties import claimcheck, seam
from deferlab.properties import strategies as s
from deferlab.reference.oracle.navit import resize_config, resize_config_arrays
from deferlab.reference.system.config import PreprocessConfig
from deferlab.reference.system.policies import HARDENED, PR_33921, RELEASED
from deferlab.reference.system.profiles import profile

K3 = profile("kimi-k3")
# Patch 2, merge 2: small images get distinct grids, so a misread layout shows in the patch count.
SMALL_GRID = profile("sglang-epd-test")
POLICIES = ["PR_33921", "RELEASED", "HARDENED"]


def big_tensor(channels: int, width: int, height: int) -> torch.Tensor:
    """A CHW uint8 tensor of any size that allocates one byte (the gate reads shape and dtype only)."""
    return torch.zeros((1, 1, 1), dtype=torch.uint8).expand(channels, height, width)


def true_bytes(width: int, height: int, channels: int, config: PreprocessConfig) -> tuple[int, int]:
    """(raw, processed) from the truth: staged channels (1 counts as 3) at the original size; 3 FP32 padded."""
    rc = resize_config(width, height, config)
    return max(channels, 3) * width * height, 3 * rc.padded_width * rc.padded_height * 4


@st.composite
def gate_requests(draw: st.DrawFn, *, max_images: int = 4) -> tuple[PreprocessConfig, list[tuple[int, int, int]]]:
    """A config and 1..max_images (channels, width, height) CHW images, sizes biased to the byte boundary."""
    config = draw(st.just(K3) | s.preprocess_configs())
    n = draw(st.integers(1, max_images))
    shapes = []
    for _ in range(n):
        c = draw(st.sampled_from([1, 3, 4]))
        w, h = draw(s.image_sizes(config=config, boundary_channels=max(c, 3)))
        shapes.append((c, w, h))
    return config, shapes


def check_gate_matches_bytes(impl: seam.Impl, policy: Any, config: PreprocessConfig, shapes: list) -> None:
    """Decision == exact byte inequality (per request or per image) and counted bytes == true bytes."""
    images = [big_tensor(c, w, h) for c, w, h in shapes]
    truths = [true_bytes(w, h, c, config) for c, w, h in shapes]
    raw, processed = sum(t[0] for t in truths), sum(t[1] for t in truths)
    if currently_in_test_context():  # steer the search (also inside claim searches) towards raw == processed
        target(-abs(raw - processed) / 1e6, label="distance to raw == processed (MB)")
    assert tuple(impl.gate_bytes(images, config)) == (raw, processed), "gate counted other bytes than the truth"
    for path, per_image in impl.gate_paths(policy):  # every call site, at its own granularity
        got = impl.defer_decisions(images, config, policy=policy, gate_path=path)
        want = [r <= p for r, p in truths] if per_image else [raw <= processed] * len(images)
        assert got == want, (
            f"at call site {path!r}: decisions {got} != byte rule {want} (raw {raw}, processed {processed})"
        )


@pytest.mark.policies("PR_33921", "RELEASED")
@given(req=gate_requests())
@example(req=(profile("sglang-gate-test"), [(3, 32, 32)]))  # SGLang's own case: defers
@example(req=(profile("sglang-gate-test-l1"), [(3, 1024, 1024)]))  # in_patch_limit 1: stays eager
def test_gate_decision_is_the_byte_inequality(impl, policy, req):
    """The gate defers exactly when raw <= processed bytes, counted from the images' true sizes."""
    config, shapes = req
    check_gate_matches_bytes(impl, policy, config, shapes)


@given(image=s.staging_ok_pil_images(max_side=10) | s.chw_uint8_tensors(max_side=10))
def test_gate_counts_the_bytes_actually_staged(impl, image):
    """The raw bytes the gate counts equal the bytes of the feature staging produces for that image."""
    staged = seam.to_numpy(impl.to_chw_uint8(image))
    raw, _ = impl.gate_bytes([image], K3)
    assert raw == staged.size, f"gate counts {raw} raw bytes, staging produced {staged.shape} = {staged.size}"


def test_gate_refuses_what_it_cannot_defer(impl):
    """No images, a non-cpu transport, no CUDA, or a float tensor: the request stays eager (semantics §4)."""
    small = [big_tensor(3, 32, 32)]
    for policy in (PR_33921, RELEASED):
        assert impl.defer_decisions(small, K3, policy=policy) == [True]
        assert impl.defer_decisions([], K3, policy=policy) == []
        for transport in ("cuda_ipc", "fabric"):
            assert impl.defer_decisions(small, K3, policy=policy, transport=transport) == [False]
        assert impl.defer_decisions(small, K3, policy=policy, cuda_available=False) == [False]
        assert impl.defer_decisions([torch.zeros(3, 32, 32)], K3, policy=policy) == [False]


@pytest.mark.policies("PR_33921", "RELEASED")
@given(floats=st.lists(s.float_tensors(), min_size=1, max_size=2), others=s.requests(max_images=2, max_side=6))
def test_float_tensors_are_never_deferred(impl, policy, floats, others):
    """A float tensor is never deferred (at the PR its whole request stays eager), and the gate does not raise."""
    images = [*others, *floats]
    decided = impl.defer_decisions(images, K3, policy=policy)
    assert len(decided) == len(images) and not any(decided[len(others) :]), f"float tensors deferred: {decided}"
    if not impl.gate_paths(policy)[0][1]:
        assert not any(decided), f"a per-request gate keeps the whole request eager for a float tensor: {decided}"


# --- C1: the byte rule ------------------------------------------------------------------------------------------


@pytest.mark.claim("C1")
def test_claim_c1_byte_rule(impl, policy):
    """C1: the gate defers only when raw <= processed, at the granularity the policy decides."""
    verdict = claimcheck.verify_claim(
        "C1",
        policy,
        gate_requests(),
        lambda req: check_gate_matches_bytes(impl, policy, *req),
        applicable=impl.defers(policy),
    )
    claimcheck.assert_expected("C1", policy, verdict)


# --- C10: per-image consistency and stability near boundaries ---------------------------------------------------


def check_per_image_consistency(
    impl: seam.Impl, policy: Any, config: PreprocessConfig, shapes: list, site: str | None = None
) -> None:
    """At the call site ``site`` of the gate (None: every one), each image's decision inside the request equals
    its decision alone."""
    images = [big_tensor(c, w, h) for c, w, h in shapes]
    for path, _ in impl.gate_paths(policy):
        if site is not None and path != site:
            continue
        together = impl.defer_decisions(images, config, policy=policy, gate_path=path)
        alone = [impl.defer_decisions([img], config, policy=policy, gate_path=path)[0] for img in images]
        if together != alone:
            pairs = list(zip(together, alone, strict=False))
            ways = [way for way, hit in (
                ("an image that alone defers is kept eager", any(a and not t for t, a in pairs)),
                ("an image that alone stays eager is deferred", any(t and not a for t, a in pairs)),
            ) if hit] or ["another number of decisions"]  # fmt: skip
            raise AssertionError(
                f"at call site {path!r}: in the request {together}, alone {alone} ({' and '.join(ways)})"
            )


def sited_requests(sites: list[str]) -> st.SearchStrategy[tuple[PreprocessConfig, list, str]]:
    """`gate_requests` and the call site each is decided at (C10's statement is per call site: its partition)."""
    return st.tuples(gate_requests(), st.sampled_from(sites)).map(lambda t: (*t[0], t[1]))


def non_monotone_sizes(config: PreprocessConfig, channels: int = 3, max_side: int = 8192) -> list[tuple[int, int]]:
    """Widths along which growing the height flips eager -> defer again (decisions alternate)."""
    found = []
    hs = np.arange(1, max_side + 1, dtype=np.int64)
    for w in range(max_side, 0, -97):
        rc = resize_config_arrays(np.full_like(hs, w), hs, config)
        defer = channels * w * hs <= 12 * rc.padded_width * rc.padded_height
        back = np.nonzero(~defer[:-1] & defer[1:])[0]
        if back.size:
            found.append((w, int(hs[back[0] + 1])))
        if len(found) >= 3:
            break
    return found


@pytest.mark.claim("C10")
def test_claim_c10_per_image_stability(impl, policy):
    """C10: an image is deferred iff it alone would be; neighbouring sizes decide alike."""

    def caveat() -> str | None:
        flips = non_monotone_sizes(K3)
        if not flips:
            return None
        return (
            "per-image decisions are consistent, but the byte rule is not monotone in size under kimi-k3: "
            + ", ".join(f"{w}x{h - 1} stays eager while {w}x{h} defers" for w, h in flips)
        )

    sites = [path for path, _ in impl.gate_paths(policy)] if impl.defers(policy) else []
    # A big image rides on a small one's bytes at the PR, and at the request path kept in every release.
    pinned = [(K3, [(3, 8192, 8192), (3, 32, 32)], site) for site in sites]
    verdict = claimcheck.verify_claim(
        "C10",
        policy,
        sited_requests(sites),
        lambda req: check_per_image_consistency(impl, policy, *req),
        pinned=pinned,
        caveat=caveat,
        applicable=impl.defers(policy),
        partition=lambda req: f"call site {req[2]}",
    )
    claimcheck.assert_expected("C10", policy, verdict)


# --- C11: what the gate admits can be materialized ----------------------------------------------------------------


def keyed_palette(key: object) -> Image.Image:
    """A 1x1 P image with ``transparency=key`` (a tuple is a form Pillow's convert refuses for P)."""
    image = Image.frombytes("P", (1, 1), bytes([0]))
    image.putpalette(bytes(3))
    image.info["transparency"] = key
    return image


def keyed_grey(key: object) -> Image.Image:
    """A 1x1 L image with ``transparency=key`` (a tuple of other than 3 values is a form Pillow's convert refuses)."""
    image = Image.new("L", (1, 1))
    image.info["transparency"] = key
    return image


def admitted_inputs() -> st.SearchStrategy[Any]:
    """Raw arrays in every layout and PIL images in every mode and transparency form (small)."""
    return s.uint8_arrays(max_side=8) | s.pil_images(max_side=8)


def input_kind(x: Any) -> str:
    """C11's partition: an array by its layout, a PIL image by where its alpha lives (a band, a transparency
    key, none); the mode itself is C12's partition."""
    if isinstance(x, s.ArrayImage):
        return f"array {x.layout}"
    if x.mode in ("LA", "La", "PA", "RGBA", "RGBa"):
        return "PIL image, alpha band"
    return "PIL image, " + ("keyed" if x.info.get("transparency") is not None else "no alpha")


def check_admitted_materializes(impl: seam.Impl, policy: Any, x: Any) -> None:
    """Rejected at the front door with a message naming the input, or admitted and materialized truthfully.

    An array whose shape is also a valid CHW image is judged by the CHW reading
    (the documented contract); no system can tell those layouts apart.
    """
    image = x.value if isinstance(x, s.ArrayImage) else x
    width, height = (x.width, x.height) if isinstance(x, s.ArrayImage) else image.size
    if isinstance(x, s.ArrayImage) and image.dim() == 3 and image.shape[0] in (1, 3, 4):
        # Also a valid CHW image (e.g. HWC (1, 1, 5) is CHW 1x5 grey): the documented CHW reading is the truth.
        width, height = int(image.shape[2]), int(image.shape[1])
    try:
        out = impl.process([image], SMALL_GRID, policy=policy)
    except (ValueError, TypeError) as e:
        if "images[0]" in str(e):
            return  # a clear front-door rejection (names the input, says what is accepted)
        raise AssertionError(f"unclear error from the producer: {type(e).__name__}: {e}") from e
    if not (out.deferred if isinstance(out.deferred, bool) else out.deferred[0]):
        return  # not admitted: stays eager
    items = impl.deliver(out.items, 1, policy=policy)[0]
    features = seam.to_numpy(impl.materialize(items, [0], SMALL_GRID, policy=policy))
    rc, p = resize_config(width, height, SMALL_GRID), SMALL_GRID.patch_size
    want_patches = (rc.padded_height // p) * (rc.padded_width // p)
    assert features.shape == (want_patches, 3, p, p), (
        f"materialized {features.shape}, the true {width}x{height} image needs {want_patches} patches"
    )


@pytest.mark.claim("C11")
def test_claim_c11_admitted_inputs_materialize(impl, policy):
    """C11: every input the gate admits is staged and materialized with its true dimensions."""
    pinned = [
        s.ArrayImage(torch.zeros((4, 5), dtype=torch.uint8), "HW", 5, 4, 1),  # 2-D: IndexError in the gate
        s.ArrayImage(torch.zeros((9, 2, 3), dtype=torch.uint8), "HWC", 2, 9, 3),  # HWC read as CHW
        # HWC with 4 channels read as a 2-channel CHW image: the owner's 3-channel normalization crashes
        s.ArrayImage(torch.zeros((2, 2, 4), dtype=torch.uint8), "HWC", 2, 2, 4),
        Image.new("La", (2, 2)),  # no converter: PIL error on the producer
        keyed_palette(
            (0, 0, 0)
        ),  # a tuple key on a P image: Pillow refuses it (HARDENED once admitted it; now rejects)
        keyed_grey((1,)),  # a 1-tuple key on an L image: Pillow's convert raises a TypeError naming no input
        keyed_grey(b"\x00"),  # a bytes key on an L image: the same TypeError, worded differently
    ]
    verdict = claimcheck.verify_claim(
        "C11",
        policy,
        admitted_inputs(),
        lambda x: check_admitted_materializes(impl, policy, x),
        pinned=pinned,
        applicable=impl.defers(policy),
        partition=input_kind,
    )
    claimcheck.assert_expected("C11", policy, verdict)


@given(x=s.uint8_arrays(max_side=8) | s.staging_ok_pil_images(max_side=8))
def test_hardened_front_door_admits_only_what_materializes(impl, x):
    """Under HARDENED, an array or stageable image is rejected clearly (naming it) or materializes truthfully."""
    check_admitted_materializes(impl, HARDENED, x)
