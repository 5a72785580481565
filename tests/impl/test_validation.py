"""Bad input: HARDENED rejects at Processor.process before any work; PR_33921 behaves as upstream does."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

import deferlab.impl.processor as processor_module
from deferlab.impl.model import materialize
from deferlab.impl.processor import Processor
from deferlab.impl.validation import ACCEPTED_MODES, validate_images
from deferlab.reference.system.policies import HARDENED, PR_33921
from tests.impl.support import K3


def _u8(*shape: int) -> torch.Tensor:
    return torch.randint(0, 256, shape, dtype=torch.uint8, generator=torch.Generator().manual_seed(0))


def _pil(mode: str, size: tuple[int, int] = (6, 5)) -> Image.Image:
    return Image.new(mode, size)


def _rgba_premultiplied() -> Image.Image:
    return Image.fromarray(np.full((5, 6, 4), 100, np.uint8), "RGBA").convert("RGBa")


def _la_premultiplied() -> Image.Image:
    return Image.fromarray(np.full((5, 6, 2), 100, np.uint8), "LA").convert("La")


def _keyed(mode: str, key: object) -> Image.Image:
    im = _pil(mode)
    im.info["transparency"] = key
    return im


def _i16() -> Image.Image:
    return Image.fromarray(np.full((5, 6), 1000, np.uint16))


# (id, input, exception type, message fragment): every input class semantics §3.1 / §4 shows being misread.
BAD_INPUTS = [
    ("float-tensor", lambda: torch.rand(3, 8, 8), ValueError, "dtype torch.float32"),
    ("2d-tensor", lambda: _u8(8, 8), ValueError, "expected 3 dims"),
    ("4d-tensor", lambda: _u8(1, 3, 8, 8), ValueError, "expected 3 dims"),
    ("hwc-tensor", lambda: _u8(32, 32, 3), ValueError, "looks like HWC"),
    ("2-channel", lambda: _u8(2, 8, 8), ValueError, "2 channels"),
    ("5-channel", lambda: _u8(5, 8, 8), ValueError, "5 channels"),
    ("zero-size-tensor", lambda: _u8(3, 0, 5), ValueError, "is empty"),
    ("zero-size-pil", lambda: _pil("RGB", (0, 5)), ValueError, "is empty"),
    ("RGBa", _rgba_premultiplied, ValueError, "'RGBa'"),
    ("La", _la_premultiplied, ValueError, "'La'"),
    ("I;16", _i16, ValueError, "'I;16'"),
    ("I", lambda: _pil("I"), ValueError, "'I'"),
    ("F", lambda: _pil("F"), ValueError, "'F'"),
    ("HSV", lambda: _pil("HSV"), ValueError, "'HSV'"),
    ("numpy", lambda: np.zeros((3, 4, 4), np.uint8), TypeError, "ndarray"),
    ("over-max-pixels", lambda: _u8(3, 10, 11), ValueError, "over config.max_pixels=100"),
    ("P-tuple-key", lambda: _keyed("P", (0, 0, 0)), ValueError, "bytes (an alpha table) or an int"),
    ("P-index-300", lambda: _keyed("P", 300), ValueError, "palette index 0..255"),
    ("L-bytes-key", lambda: _keyed("L", b"\x00"), ValueError, "an int grey level"),
    ("1-float-key", lambda: _keyed("1", 1.5), ValueError, "an int grey level"),
]


@pytest.mark.parametrize(("make", "exc", "fragment"), [b[1:] for b in BAD_INPUTS], ids=[b[0] for b in BAD_INPUTS])
def test_hardened_rejects_before_any_work(make, exc, fragment: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """HARDENED: a clear error naming the image index and the problem, raised before the gate or staging runs."""

    def no_work(*args: object, **kwargs: object) -> None:
        raise AssertionError("work started before validation")

    monkeypatch.setattr(processor_module, "defer_decisions", no_work)
    monkeypatch.setattr(processor_module, "resize_configs_for", no_work)
    proc = Processor(K3.with_(max_pixels=100), policy=HARDENED, cuda_available=True, device="cpu")
    with pytest.raises(exc, match="images\\[1\\]") as err:
        proc.process([_u8(3, 4, 4), make()])
    assert fragment in str(err.value)


def test_hardened_accepts_good_modes() -> None:
    """Every accepted PIL mode and 1/3/4-channel CHW uint8 tensors pass validation."""
    imgs = [_pil(m) for m in ACCEPTED_MODES] + [_u8(c, 5, 6) for c in (1, 3, 4)] + [_u8(3, 8, 3)]
    imgs += [_keyed("P", b"\x00\x80"), _keyed("P", 7), _keyed("L", 9), _keyed("L", (9, 9, 9)), _keyed("RGB", 5)]
    validate_images(imgs, K3)
    out = Processor(K3, policy=HARDENED, cuda_available=True, device="cpu").process(imgs)
    assert len(out.items) == len(imgs)


def test_hardened_rejects_non_list() -> None:
    """The request must be a list or tuple."""
    with pytest.raises(TypeError, match="list or tuple"):
        Processor(K3, policy=HARDENED).process(_u8(3, 4, 4))  # type: ignore[arg-type]


# --- the same inputs under PR_33921: what upstream does --------------------------------------------


def _pr() -> Processor:
    return Processor(K3, policy=PR_33921, cuda_available=True, device="cpu")


def test_pr_2d_tensor_index_error_in_gate() -> None:
    """PR: a 2-D uint8 tensor raises IndexError in the gate's dimension lookup."""
    with pytest.raises(IndexError):
        _pr().process([_u8(8, 8)])


def test_pr_hwc_tensor_staged_as_chw() -> None:
    """PR: an (H, W, 3) tensor is read as CHW (width 3, height 32): deferred, wrong grid, garbage, no error."""
    out = _pr().process([_u8(32, 32, 3)])
    assert out.deferred is True
    assert out.items[0].model_specific_data["image_grid_thw"].tolist() == [[1, 4, 2]]  # a 32x32 image is [1, 4, 4]
    feats = materialize(out.items, [0], config=K3, device="cpu", policy=PR_33921)
    assert tuple(feats.shape) == (8, 3, 14, 14)


def test_pr_float_tensor_goes_eager() -> None:
    """PR: a float tensor is not deferred and the eager stager accepts it (float32 patches)."""
    out = _pr().process([torch.rand(3, 8, 8) * 255])
    assert out.deferred is False and out.items[0].feature.dtype == torch.float32


def test_pr_five_channels_composited_as_garbage() -> None:
    """PR: a 5-channel tensor is staged unchecked; channel 3 is taken as alpha and the result materializes."""
    out = _pr().process([_u8(5, 8, 8)])
    assert out.deferred is True
    assert tuple(materialize(out.items, [0], config=K3, device="cpu").shape) == (4, 3, 14, 14)


def test_pr_premultiplied_alpha_dropped() -> None:
    """PR: RGBa has no 'A' band, so it stages as 3 channels: alpha silently dropped, no background composite."""
    x = _pr().process([_rgba_premultiplied()]).items[0].feature
    assert x.shape[0] == 3


def test_pr_i16_clipped() -> None:
    """PR: a 16-bit grayscale image (value 1000) stages through PIL's conversion as saturated 255."""
    x = _pr().process([_i16()]).items[0].feature
    assert x.shape[0] == 3 and int(x.min()) == 255


def test_pr_zero_size_divides_by_zero() -> None:
    """PR: a zero-width image reaches the NaViT math and raises ZeroDivisionError (no front-door check)."""
    with pytest.raises(ZeroDivisionError):
        _pr().process([_pil("RGB", (0, 5))])


def test_pr_has_no_pixel_cap() -> None:
    """PR: no max_pixels check; an image over deferlab's cap is processed."""
    out = Processor(K3.with_(max_pixels=100), cuda_available=True, device="cpu").process([_u8(3, 10, 11)])
    assert len(out.items) == 1
