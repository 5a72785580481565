"""`strategies.reuse.reused`: one strategy object per factory call, drawing exactly what a fresh one draws.

Why: the claims' composites call the image, config and key factories on every draw; reusing the objects cut a
third of drawing a request. A claim's verdict and counterexample depend on the examples drawn (derandomized under
the ``ci`` profile), so a reused strategy must give the same examples, in the same order, with the same label
(the shrinker orders its passes by label) as a fresh one. These tests fail if caching changed what is drawn.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from deferlab.properties import strategies as s
from deferlab.properties.strategies import images
from deferlab.properties.strategies.reuse import reused
from deferlab.reference.system.contract import ACCEPTED_MODES


def _fingerprint(x: Any) -> Any:
    """What an example is, by content (a PIL image's repr names its address, not its pixels)."""
    if isinstance(x, Image.Image):
        palette = x.getpalette() if x.mode in ("P", "PA") else None
        return ("PIL", x.mode, x.size, hashlib.sha1(x.tobytes()).hexdigest(), repr(x.info), repr(palette))
    if isinstance(x, images.ArrayImage):
        return ("array", _fingerprint(x.value), x.layout, x.width, x.height, x.channels)
    if hasattr(x, "numpy") or isinstance(x, np.ndarray):
        a = np.asarray(x)
        return (str(a.dtype), a.shape, hashlib.sha1(a.tobytes()).hexdigest())
    if isinstance(x, list | tuple):
        return [_fingerprint(v) for v in x]
    return repr(x)


def _examples(strategy: st.SearchStrategy[Any], n: int = 60) -> list[Any]:
    """The first ``n`` derandomized examples of ``strategy`` (as the ci profile draws them), fingerprinted."""
    seen: list[Any] = []

    @settings(max_examples=n, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def draw(data: st.DataObject) -> None:
        seen.append(_fingerprint(data.draw(strategy)))

    draw()
    return seen


# (factory, args, kwargs): the factories the claims' composites call on every draw, with the arguments they pass
CALLS = [
    (s.pil_images, (), {"max_side": 8}),
    (s.staging_ok_pil_images, (), {"max_side": 9, "modes": ACCEPTED_MODES}),
    (s.chw_uint8_tensors, (), {"max_side": 10}),
    (s.uint8_arrays, (), {"max_side": 8}),
    (s.float_tensors, (), {}),
    (s.requests, (), {"min_images": 2, "max_images": 4, "max_side": 9}),
    (s.pixel_configs, (), {}),
    (s.preprocess_configs, (), {}),
    (s.image_sizes, (), {"boundary_channels": 3}),
    (s.backgrounds, (), {"allow_none": False}),
    (s.normalization_stats, (), {}),
    (s.owner_partitions, (3,), {}),
    (s.loads, (), {}),
    # the inner strategies `pil_images` and `uint8_arrays` draw from on every image (the pixel bytes, the mode,
    # the transparency key): reused since a fresh one per image was validated anew on each draw
    (images._bytes_from, ((0, 7, 255), 24), {}),
    (images._sampled, (images.ALL_MODES,), {}),
    (images._palette_keys, (5,), {}),
    (images._grey_keys, (65535,), {}),
    (images._rgb_keys, (False,), {}),
]


@pytest.mark.parametrize(("factory", "args", "kwargs"), CALLS, ids=[c[0].__name__ for c in CALLS])
def test_a_reused_strategy_draws_what_a_fresh_one_draws(factory, args, kwargs):
    """The same object for the same arguments, and its examples and label those of a fresh strategy's."""
    reused_one = factory(*args, **kwargs)
    assert factory(*args, **kwargs) is reused_one, f"{factory.__name__}: a new object for the same arguments"
    fresh = factory.__wrapped__(*args, **kwargs)
    assert fresh is not reused_one
    assert _examples(reused_one) == _examples(fresh), f"{factory.__name__}: reuse changed the examples drawn"
    assert reused_one.label == fresh.label, f"{factory.__name__}: reuse changed the label the shrinker orders by"


def test_a_composite_drawing_reused_factories_draws_as_before():
    """A request composite as the claims write it (factories called inside the draw) gives the examples it gives
    when each call builds a fresh strategy, its second run included (the cached objects already drawn from)."""

    def composite(fresh: bool) -> st.SearchStrategy[Any]:
        pick = (lambda f: f.__wrapped__) if fresh else (lambda f: f)

        @st.composite
        def request(draw: st.DrawFn) -> Any:
            config = draw(st.just(None) | pick(s.pixel_configs)())
            imgs = draw(pick(s.requests)(min_images=2, max_images=4, max_side=9))
            return config, imgs, draw(pick(s.owner_partitions)(len(imgs)))

        return request()

    want = _examples(composite(fresh=True), 40)
    assert _examples(composite(fresh=False), 40) == want
    assert _examples(composite(fresh=False), 40) == want


def test_unhashable_arguments_build_a_fresh_strategy():
    """A list of modes (unhashable) is served as before: a fresh strategy each call, drawing those modes only."""
    one, two = s.pil_images(modes=["L", "RGB"], max_side=4), s.pil_images(modes=["L", "RGB"], max_side=4)
    assert one is not two
    assert {mode for _, mode, *_ in _examples(one, 30)} == {"L", "RGB"}


def test_reused_keeps_the_factory_name_and_doc():
    @reused
    def factory(n: int) -> st.SearchStrategy[int]:
        """Doc."""
        return st.integers(0, n)

    assert factory.__name__ == "factory" and factory.__doc__ == "Doc."
    assert factory(3) is factory(3) and factory(3) is not factory(4)
