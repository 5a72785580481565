"""Stage properties that run on real code too (``real_code``): compositing alone against the oracle, and the
empty batch, on the model and under ``--sglang`` alike.

Why beside property 1 (``test_equivalence``): that one chains the stages, each
fed the implementation's previous output, and on real SGLang it stops at the
resize (SGLang's torch bicubic is not the oracle's PIL-equivalent one; C14
records what that serves), so on real code nothing after the resize was ever
compared, and it is not collected under ``--sglang``. The claims that reach
compositing there (C12, C14) already fail on the unmutated code at their first
counterexample, and C4 compares eager with deferred, which share the function:
a flaw in ``fill_transparent_bg`` itself was seen by nothing (a mutation
campaign's survivors). Here compositing gets exactly what the pipeline hands it,
integer levels 0..255 in float32 (staging gives uint8; SGLang's resize rounds
and clamps to 0..255), every channel count, alpha and background, and must equal
the oracle bitwise with the device's ``A / 255`` arithmetic (semantics §3.4). The background may also come as
the checkpoint's own dict with keys left out (each takes its default, as the checkpoint's dataclass and SGLang's
``.get`` give it: the full campaign's survivors changed those defaults unseen), and a pattern the checkpoint
does not know is refused (read as ``>=`` or ``<=``, a name sorting beside a known one was taken for it).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from deferlab.properties import seam
from deferlab.properties import strategies as s
from deferlab.reference.oracle.background import fill_transparent_bg
from deferlab.reference.system.config import BACKGROUND_PATTERNS, BackgroundConfig

pytestmark = pytest.mark.real_code


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.ascontiguousarray(a, dtype=np.float32), np.ascontiguousarray(b, dtype=np.float32)
    return a.shape == b.shape and bool((a.view(np.uint32) == b.view(np.uint32)).all())


@st.composite
def composite_inputs(draw: st.DrawFn) -> tuple[np.ndarray, BackgroundConfig | None]:
    """(pixels, background): a (C, H, W) float32 image of integer levels, C 3 or 4, sides 1..24 (so chessboard
    squares of 1..16 px show both phases), alpha from opaque / transparent / any level, and any background."""
    c = draw(st.sampled_from([4, 4, 3]))
    h, w = draw(st.integers(1, 24)), draw(st.integers(1, 24))
    rgb = draw(hnp.arrays(np.uint8, (3, h, w)))
    layers = [rgb]
    if c == 4:
        kind = draw(st.sampled_from(["any", "any", "binary", "one level"]))
        if kind == "binary":
            alpha = draw(hnp.arrays(np.uint8, (1, h, w), elements=st.sampled_from([0, 255])))
        elif kind == "one level":
            alpha = np.full((1, h, w), draw(st.integers(0, 255)), dtype=np.uint8)
        else:
            alpha = draw(hnp.arrays(np.uint8, (1, h, w)))
        layers.append(alpha)
    return np.concatenate(layers).astype(np.float32), draw(s.backgrounds())


CHESS = BackgroundConfig(pattern="chessboard", square_size=2, white_value=255, gray_value=180)
_RAMP = np.arange(4 * 5 * 7, dtype=np.float32).reshape(4, 5, 7) * 7 % 256


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=composite_inputs())
@example(case=(_RAMP, CHESS))
@example(case=(_RAMP, BackgroundConfig(pattern="chessboard", square_size=3, gray_value=0, square_on_top_left=False)))
@example(case=(_RAMP, BackgroundConfig(pattern="white")))
@example(case=(_RAMP, BackgroundConfig(pattern="gray")))
@example(case=(_RAMP, None))
def test_compositing_equals_the_oracle(impl, device, case):
    """``fill_transparent_bg`` on what the pipeline hands it equals the oracle's compositing bit for bit."""
    pixels, background = case
    arithmetic = "cuda" if device.startswith("cuda") else "cpu"
    want = fill_transparent_bg(pixels, background, arithmetic=arithmetic)
    got = seam.to_numpy(impl.fill_transparent_bg(pixels, background, device)).astype(np.float32)
    where = "" if got.shape != want.shape else f" at {np.argwhere(got != want)[:3].tolist()}"
    assert same_bits(got, want), (
        f"compositing {pixels.shape} over {background}: {got.shape} vs the oracle's {want.shape}, "
        f"{int((got != want).sum()) if got.shape == want.shape else 'all'} values differ{where}"
    )


KEYS = tuple(BackgroundConfig().to_dict())  # the checkpoint dict's key names, in its order (reference.system.config)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=composite_inputs(), keep=st.lists(st.booleans(), min_size=len(KEYS), max_size=len(KEYS)))
@example(case=(_RAMP, CHESS), keep=[True, False, False, False, False])  # a bare {"pattern": "chessboard"}
def test_a_checkpoint_dict_composites_with_the_defaults_of_the_keys_it_leaves_out(impl, device, case, keep):
    """A dict with some keys left out composites as the config its defaults make (semantics §3.4), bit for bit."""
    pixels, background = case
    full = (background or CHESS).to_dict()
    partial = {k: full[k] for k, kept in zip(KEYS, keep, strict=True) if kept}
    want = fill_transparent_bg(pixels, BackgroundConfig.from_dict(partial), arithmetic="cuda" if device.startswith("cuda") else "cpu")  # fmt: skip
    got = seam.to_numpy(impl.fill_transparent_bg(pixels, partial, device)).astype(np.float32)
    assert same_bits(got, want), f"compositing {pixels.shape} over the dict {partial}: differs from its defaults'"


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.text("abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=9).filter(lambda n: n not in BACKGROUND_PATTERNS))  # fmt: skip
@example(name="zebra")  # sorts after "white"
@example(name="aqua")  # before "black"
@example(name="green")  # after "gray"
def test_a_background_pattern_the_checkpoint_does_not_know_is_refused(impl, name):
    """Compositing over ``{"pattern": name}`` for a name that is none of the four is a ValueError."""
    with pytest.raises(ValueError):
        got = impl.fill_transparent_bg(_RAMP, {"pattern": name})
        raise AssertionError(f"pattern {name!r} composited: {tuple(seam.to_numpy(got).shape)}")


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(config=s.pixel_configs())
@example(config=s.K3)
def test_an_empty_batch_preprocesses_to_nothing(impl, config):
    """No image: (0, 3, p, p) patches and (0, 3) grids, nothing invented (semantics §3.5)."""
    pv, grids = impl.preprocess([], config)
    p = config.patch_size
    assert tuple(seam.to_numpy(pv).shape) == (0, 3, p, p), f"patches {tuple(seam.to_numpy(pv).shape)}"
    assert tuple(seam.to_numpy(grids).shape) == (0, 3), f"grids {tuple(seam.to_numpy(grids).shape)}"
