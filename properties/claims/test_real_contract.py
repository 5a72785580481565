"""The request's and the contract's refusals (``real_code``): what a producer or an owner must refuse, and what it
must not, on the model and under ``--sglang`` alike (semantics §5.1, §6.2, §15.6; the facts in §17.2). The gate's
own rules (the transport, the dtype, the channel count) are `test_real_gate`'s; the inputs both draw are
`real_support`'s.

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
  CPython's ints are no longer cached), and one off by one is refused;
* the owner refuses an item whose grid has any row count but one (``!= 1``
  read as ``> 1`` let an empty grid through, as ``< 1`` two images' grids),
  and materializes a deferred image of more than 256 patches (its length
  check, ``!=`` read as ``is not``, refused every such image): the full
  campaign on PR #33921's functions left these to survive;
* the scheduler's whitelist skips the pre-embed move only for a bound
  ``get_image_feature`` / ``get_video_feature`` (a plain function, or a method
  of another name, of a whitelisted class is moved as before).
"""

from __future__ import annotations

import dataclasses
import string
from collections.abc import Mapping
from typing import Any

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from deferlab.properties import seam
from deferlab.properties.claims.real_support import K3, SETTINGS, tiny
from deferlab.reference.system.contract import (
    DEFERRED_PREPROCESSING_KEY,
    GRID_THWS_KEY,
    IMAGE_GRID_THW_KEY,
)

pytestmark = pytest.mark.real_code

EPD_POLICIES = ("INTERIM_418975B", "INTERIM_3D3194F", "RELEASED_0_5_19", "RELEASED", "HARDENED")


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


# -- 4. the owner takes one grid per item, and a deferred image of any patch count ------------------------------------


@pytest.mark.policies(*EPD_POLICIES)
@SETTINGS
@given(rows=st.sampled_from([0, 2, 3]), n=st.integers(1, 3), which=st.integers(0, 2), seed=st.integers(0, 9))
@example(rows=0, n=1, which=0, seed=0)  # an empty grid: "> 1" lets it through
@example(rows=2, n=2, which=1, seed=0)  # two images' grids in one item: "< 1" lets it through
def test_the_owner_refuses_an_item_without_exactly_one_grid(impl, policy, rows, n, which, seed):
    """An item whose grid has 0 or several rows is a ValueError on its owner (one logical image per item: the DP
    owner assignment and the IPC lease accounting are per item, semantics §5.1), deferred or not."""
    _epd_only(impl, policy)
    items = impl.epd_items([tiny(2 + i, 3, seed + i) for i in range(n)], K3, policy=policy, backend="gpu")
    msd = items[which % n].model_specific_data
    key = IMAGE_GRID_THW_KEY if msd.get(IMAGE_GRID_THW_KEY) is not None else GRID_THWS_KEY
    one = torch.as_tensor(msd[key])
    msd[key] = one.repeat(rows, 1) if rows else one[:0]
    delivered = impl.deliver(items, 1, policy=policy)[0]
    with pytest.raises(ValueError):
        got = impl.materialize(delivered, range(n), K3, policy=policy)
        raise AssertionError(f"an item with a {rows}-row grid was materialized: {tuple(seam.to_numpy(got).shape)}")


@pytest.mark.policies(*EPD_POLICIES)
@settings(SETTINGS, max_examples=4)  # each image is ~300 patches of 14 x 14: a few suffice
@given(side=st.tuples(st.integers(230, 260), st.integers(230, 260)), seed=st.integers(0, 9))
@example(side=(224, 238), seed=0)  # 16 x 17 patches: 272, the first whole grid past 256
def test_the_owner_materializes_a_deferred_image_of_more_than_256_patches(impl, policy, side, seed):
    """A deferred image whose grid has more than 256 patches (where CPython stops caching ints) materializes to
    exactly its grid's rows."""
    _epd_only(impl, policy)
    (item,) = impl.epd_items([tiny(*side, seed)], K3, policy=policy, backend="gpu")
    rows = int(_grid(item).prod())
    assert rows > 256, f"{side}: {rows} patches (the test needs more than 256)"
    got = seam.to_numpy(impl.materialize(impl.deliver([item], 1, policy=policy)[0], [0], K3, policy=policy))
    assert got.shape[0] == rows, f"{side}: {got.shape[0]} rows materialized for a grid of {rows} patches"


# -- 5. the whitelist names bound image and video feature methods only ------------------------------------------------

WHITELISTED = "KimiK3ForConditionalGeneration"  # whitelisted wherever the policy skips K3's move (PR #33921)
METHOD_NAMES = ("get_image_feature", "get_video_feature", "get_audio_feature", "forward", "get_input_embeddings")


@pytest.mark.policies("PRE_PR", "PR_33921", "RELEASED", "HARDENED")
@SETTINGS
@given(
    cls=st.sampled_from(
        [WHITELISTED, "KimiK25ForConditionalGeneration", "Qwen3VLForConditionalGeneration", "LlamaForCausalLM"]
    ),  # fmt: skip
    name=st.one_of(st.sampled_from(METHOD_NAMES), st.from_regex(r"\Aget_[a-z]{1,8}_feature\Z")),
)
@example(cls=WHITELISTED, name="get_image_feature")
@example(cls=WHITELISTED, name="get_audio_feature")  # another name of a whitelisted class: never skipped
def test_the_whitelist_skips_only_bound_image_and_video_feature_methods(impl, policy, cls, name):
    """A plain function is never skipped, nor a method of another name; a bound get_image_feature and
    get_video_feature of one class are skipped alike, and K3's as the policy's whitelist says."""
    if not hasattr(impl, "skips_pre_embed_move"):  # an optional seam method (the model and SGLang's driver have it)
        pytest.skip("this implementation cannot ask its whitelist about any callable")

    def method(attribute: str) -> Any:
        def feature(self: Any, items: Any) -> None:
            return None

        feature.__name__ = feature.__qualname__ = attribute  # what the whitelist reads, as on a real model
        return feature

    model = type(cls, (), {n: method(n) for n in {*METHOD_NAMES, name}})()
    plain = getattr(type(model), name)  # a function looked up on the class: no __self__
    assert not impl.skips_pre_embed_move(plain, policy), f"the plain function {cls}.{name} is skipped"
    bound = impl.skips_pre_embed_move(getattr(model, name), policy)
    if name not in ("get_image_feature", "get_video_feature"):
        assert not bound, f"{cls}.{name}, a bound method of another name, is skipped"
        return
    other = "get_video_feature" if name == "get_image_feature" else "get_image_feature"
    assert bound == impl.skips_pre_embed_move(getattr(model, other), policy), f"{cls}: image and video disagree"
    if cls == WHITELISTED:
        assert bound == impl.skip_pre_embed(policy), f"{cls}.{name}: {bound}, the policy's whitelist says otherwise"


# -- 6. a 2-D tensor is staged as its one-channel image ---------------------------------------------------------------


@pytest.mark.policies(*EPD_POLICIES)
@SETTINGS
@given(h=st.integers(1, 6), w=st.integers(1, 6), seed=st.integers(0, 9))
@example(h=2, w=3, seed=0)
def test_the_encoder_stages_a_2d_tensor_as_its_one_channel_image(impl, policy, h, w, seed):
    """An (H, W) uint8 tensor is staged as the (1, H, W) one is (semantics §3.1: unsqueezed, then the channel
    repeated to 3): the same grid and the same staged pixels."""
    _epd_only(impl, policy)
    flat = tiny(h, w, seed)[:1].clone()  # (1, h, w)
    (got,) = impl.epd_items([flat[0].clone()], K3, policy=policy, backend="gpu")
    (want,) = impl.epd_items([flat.clone()], K3, policy=policy, backend="gpu")
    assert torch.equal(_grid(got), _grid(want)), f"{h}x{w}: grid {_grid(got).tolist()} != {_grid(want).tolist()}"
    a, b = torch.as_tensor(got.feature), torch.as_tensor(want.feature)
    assert a.shape == b.shape and torch.equal(a, b), f"{h}x{w}: staged {tuple(a.shape)} != {tuple(b.shape)}"
