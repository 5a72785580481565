"""The request's and the contract's refusals (``real_code``): what a producer or an owner must refuse, and what it
must not, on the model and under ``--sglang`` alike (semantics §5.1, §6.2, §15.6; the facts in §17.2).

Why: the claims feed every path well-formed requests (one image per placeholder,
bare images, the backends the producers write), so three of SGLang's guards ran
under no claim that could see them change (a mutation campaign's survivors):

* the owner's loader refuses a deferred item of a backend it does not know
  (``backend == "cpu"`` read as ``>=`` sent "npu" or "xla" down the CPU
  materialization): here every backend name but "gpu" and "cpu", above and
  below "cpu" in string order, alone or beside "gpu" items, must be a
  ValueError (naming it when every item has it);
* the EPD encoder refuses a dict media item that is not ``{"type": "image",
  "image": ...}`` (``or`` read as ``and`` accepted a video carrying an image
  key) and reads a well-formed one as its image;
* a request with as many images as placeholders is processed, whatever the
  count (``!=`` read as ``is not`` refused every count above 256, where
  CPython's ints are no longer cached), and one off by one is refused.
"""

from __future__ import annotations

import dataclasses
import string
from collections.abc import Mapping
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from deferlab.properties import seam
from deferlab.reference.system.contract import DEFERRED_PREPROCESSING_KEY, GRID_THWS_KEY, IMAGE_GRID_THW_KEY
from deferlab.reference.system.profiles import profile

pytestmark = pytest.mark.real_code

K3 = profile("kimi-k3")  # small images always defer under it
EPD_POLICIES = ("INTERIM_418975B", "INTERIM_3D3194F", "RELEASED_0_5_19", "RELEASED", "HARDENED")
SETTINGS = settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow], deadline=None)


def tiny(h: int, w: int, seed: int = 0) -> torch.Tensor:
    """A uint8 (3, h, w) image whose values depend on ``seed`` and the position (cheap, and each one distinct)."""
    return ((torch.arange(3 * h * w, dtype=torch.int64) * 37 + seed * 11) % 256).to(torch.uint8).reshape(3, h, w)


def _epd_only(impl: Any, policy: str) -> None:
    if not impl.has_epd(policy):
        pytest.skip("the EPD encoder has no deferred producer here (the PR as merged, or an eager-only release)")


def _grid(item: Any) -> torch.Tensor:
    msd = item.model_specific_data
    grid = msd.get(IMAGE_GRID_THW_KEY)
    return torch.as_tensor(msd[GRID_THWS_KEY] if grid is None else grid)


# -- 1. the owner refuses a deferred backend it does not know ---------------------------------------------------------

KNOWN_BACKENDS = ("gpu", "cpu")
NAMED_BACKENDS = ("npu", "xla", "tpu", "xpu", "hpu", "mps", "cuda", "rocm", "cpu0", "gpu ", "aiter", "amd", "c", "CPU", "GPU", "")  # fmt: skip
backend_names = st.one_of(
    st.sampled_from(NAMED_BACKENDS), st.text(string.ascii_letters + string.digits + "_-", max_size=6)
).filter(lambda name: name not in KNOWN_BACKENDS)


@st.composite
def backend_cases(draw: st.DrawFn) -> dict[str, Any]:
    """Images (sides 1..6) and which of them carry the unknown backend (at least one; the others stay "gpu")."""
    n = draw(st.integers(1, 3))
    sizes = [(draw(st.integers(1, 6)), draw(st.integers(1, 6))) for _ in range(n)]
    unknown = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    unknown[draw(st.integers(0, n - 1))] = True
    return {"name": draw(backend_names), "sizes": sizes, "unknown": unknown}


def _with_backend(config: Any, name: str) -> Any:
    """The deferred config with ``backend`` set to ``name``, in its own form (a dataclass or a dict)."""
    if dataclasses.is_dataclass(config) and any(f.name == "backend" for f in dataclasses.fields(config)):
        return dataclasses.replace(config, backend=name)
    if isinstance(config, Mapping) and "backend" in config:
        return {**config, "backend": name}
    pytest.skip(f"this deferred config carries no backend ({type(config).__name__}): its owner reads none")


@pytest.mark.policies(*EPD_POLICIES)
@SETTINGS
@given(case=backend_cases())
@example(case={"name": "npu", "sizes": [(2, 3)], "unknown": [True]})  # sorts above "cpu"
@example(case={"name": "xla", "sizes": [(2, 2), (3, 1)], "unknown": [False, True]})  # above, beside a "gpu" item
@example(case={"name": "cuda", "sizes": [(1, 1), (4, 2)], "unknown": [True, True]})
@example(case={"name": "amd", "sizes": [(3, 3)], "unknown": [True]})  # sorts below "cpu"
@example(case={"name": "CPU", "sizes": [(1, 2)], "unknown": [True]})
def test_the_owner_refuses_a_backend_it_does_not_know(impl, policy, case):
    """A deferred item of a backend other than "gpu" / "cpu" is a ValueError on its owner, never materialized."""
    _epd_only(impl, policy)
    name = case["name"]
    images = [tiny(h, w, i) for i, (h, w) in enumerate(case["sizes"])]
    items = impl.epd_items(images, K3, policy=policy, backend="gpu")
    for item, unknown in zip(items, case["unknown"], strict=True):
        if unknown:
            msd = item.model_specific_data
            msd[DEFERRED_PREPROCESSING_KEY] = _with_backend(msd[DEFERRED_PREPROCESSING_KEY], name)
    delivered = impl.deliver(items, 1, policy=policy)[0]
    try:
        got = impl.materialize(delivered, range(len(images)), K3, policy=policy)
    except ValueError as e:
        if all(case["unknown"]):  # beside "gpu" items an owner that needs one backend may say "cannot mix"
            assert name in str(e), f"the refusal of backend {name!r} does not name it: {e}"
        return
    except Exception as e:
        raise AssertionError(f"backend {name!r}: {type(e).__name__}: {e} (a ValueError refusing it was expected)") from e  # fmt: skip
    shape = tuple(seam.to_numpy(got).shape)
    raise AssertionError(f"backend {name!r} (items {case['unknown']}) was materialized, {shape}, not refused")


# -- 2. the EPD encoder refuses a dict media item that is not an image ------------------------------------------------

BAD_TYPES = ("video", "audio", "Image", "IMAGE", "image_url", "", None)


@st.composite
def media_cases(draw: st.DrawFn) -> dict[str, Any]:
    """One to three media entries: a bare image, a well-formed dict (sometimes with a content hash), or a dict
    whose type is not "image" and/or that lacks the "image" key (the entry's kind names which)."""
    n = draw(st.integers(1, 3))
    kinds = [draw(st.sampled_from(["bare", "dict", "dict", "bad type", "no image", "neither", "no type"])) for _ in range(n)]  # fmt: skip
    return {
        "kinds": kinds,
        "sizes": [(draw(st.integers(1, 5)), draw(st.integers(1, 5))) for _ in range(n)],
        "types": [draw(st.sampled_from(BAD_TYPES)) for _ in range(n)],
        "hash": draw(st.booleans()),
        "backend": draw(st.sampled_from(KNOWN_BACKENDS)),
    }


def _entry(kind: str, image: torch.Tensor, bad_type: str | None, with_hash: bool, i: int) -> Any:
    if kind == "bare":
        return image
    entry: dict[str, Any] = {"type": "image", "image": image}
    if kind == "dict" and with_hash:
        entry["content_hash"] = f"sha256:{i:064x}"
    if kind in ("bad type", "neither"):
        entry["type"] = bad_type
    if kind in ("no image", "neither"):
        entry["image_url"] = entry.pop("image")  # the image under another key: still not an image item
    if kind == "no type":
        del entry["type"]
    return entry


@pytest.mark.policies(*EPD_POLICIES)
@SETTINGS
@given(case=media_cases())
@example(case={"kinds": ["bad type"], "sizes": [(2, 2)], "types": ["video"], "hash": False, "backend": "gpu"})
@example(case={"kinds": ["dict", "no image"], "sizes": [(2, 3), (1, 1)], "types": [None, None], "hash": True, "backend": "cpu"})  # fmt: skip
@example(case={"kinds": ["no type"], "sizes": [(3, 1)], "types": [None], "hash": False, "backend": "gpu"})
@example(case={"kinds": ["bare", "dict"], "sizes": [(2, 2), (4, 3)], "types": [None, None], "hash": True, "backend": "gpu"})  # fmt: skip
def test_the_encoder_refuses_a_media_item_that_is_not_an_image(impl, policy, case):
    """A dict media item of another type or without its image is a ValueError; a well-formed one is its image."""
    _epd_only(impl, policy)
    images = [tiny(h, w, i) for i, (h, w) in enumerate(case["sizes"])]
    media = [
        _entry(kind, img, bad, case["hash"], i)
        for i, (kind, img, bad) in enumerate(zip(case["kinds"], images, case["types"], strict=True))
    ]
    malformed = [m for m in media if isinstance(m, dict) and (m.get("type") != "image" or "image" not in m)]
    backend = case["backend"]
    try:
        items = impl.epd_items(media, K3, policy=policy, backend=backend)
    except ValueError as e:
        assert malformed, f"well-formed media {case['kinds']} refused: {e}"
        return
    except Exception as e:
        raise AssertionError(f"media {case['kinds']}: {type(e).__name__}: {e} (want a ValueError or items)") from e
    assert not malformed, f"a media item that is not an image was accepted: {malformed[0]!r} (kinds {case['kinds']})"
    want = impl.epd_items([img.clone() for img in images], K3, policy=policy, backend=backend)
    assert len(items) == len(want), f"{len(items)} items for {len(media)} media entries"
    for i, (got, ref) in enumerate(zip(items, want, strict=True)):
        assert torch.equal(_grid(got), _grid(ref)), f"item {i}: grid {_grid(got).tolist()} != {_grid(ref).tolist()}"
        same = torch.equal(torch.as_tensor(got.feature), torch.as_tensor(ref.feature))
        assert same, f"item {i} ({case['kinds'][i]}, {backend}): its feature is not the bare image's"


# -- 3. one image per placeholder is processed, for any count ---------------------------------------------------------


@pytest.mark.policies("PRE_PR", "PR_33921", "INTERIM_3D3194F", "RELEASED", "HARDENED")
@settings(SETTINGS, max_examples=12)  # a count near 300 costs ~0.4 s on real code: a few of them suffice
@given(n=st.one_of(st.integers(1, 6), st.integers(250, 300)), off=st.sampled_from([-1, 1]))
@example(n=257, off=1)  # the first count CPython does not cache
@example(n=300, off=-1)
@example(n=1, off=-1)  # a prompt with no placeholder for its one image
def test_one_image_per_placeholder_is_processed_for_any_count(impl, policy, n, off):
    """A request with as many images as placeholders gives one item per image; one off by one is a ValueError."""
    if not hasattr(impl, "process_request"):  # an optional seam method (the model and SGLang's driver have it)
        pytest.skip("this implementation has no process_request (a request's prompt and images)")
    images = [tiny(1 + i % 2, 1 + i % 2, i) for i in range(n)]
    try:
        out = impl.process_request(images, K3, placeholders=n, policy=policy)
    except Exception as e:
        raise AssertionError(f"{n} images for {n} placeholders refused: {type(e).__name__}: {e}") from e
    assert len(out.items) == n, f"{len(out.items)} items for {n} images"
    with pytest.raises(ValueError):
        impl.process_request(images, K3, placeholders=n + off, policy=policy)
