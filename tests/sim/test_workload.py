"""Seeded workloads and the corpus reader (sim.workload, sim.corpus)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from deferlab.reference.oracle import corpus as builtin_corpus
from deferlab.sim.corpus import has_alpha, load_corpus
from deferlab.sim.workload import FAMILIES, WorkloadSpec, corpus_available, generate


@given(family=st.sampled_from([f for f in FAMILIES if f != "corpus"]), seed=st.integers(0, 2**32 - 1))
def test_same_seed_same_workload(family: str, seed: int) -> None:
    """Reproducible: one seed fixes sizes, counts and arrivals."""
    size = (640, 480) if family == "fixed" else None  # the fixed family takes its one image size
    spec = WorkloadSpec(family=family, n_requests=20, seed=seed, image_size=size)
    a, b = generate(spec), generate(spec)
    for field in ("arrival_s", "offsets", "width", "height", "channels"):
        assert np.array_equal(getattr(a, field), getattr(b, field))


@given(
    spec=st.builds(
        WorkloadSpec,
        family=st.sampled_from(["chat", "docs", "4k", "mixed"]),
        n_requests=st.integers(1, 50),
        images_per_request=st.none() | st.tuples(st.integers(0, 2), st.integers(2, 5)),
        arrival=st.sampled_from(["poisson", "closed"]),
        rate=st.floats(0.1, 100),
        seed=st.integers(0, 99),
    )
)
def test_workload_shape(spec: WorkloadSpec) -> None:
    """Counts respect the requested range, arrivals are sorted (all 0 when closed), channels are 3 or 4."""
    wl = generate(spec)
    k = wl.images_per_request
    if spec.images_per_request:
        assert ((k >= spec.images_per_request[0]) & (k <= spec.images_per_request[1])).all()
    assert wl.offsets[-1] == wl.n_images and len(wl.arrival_s) == spec.n_requests
    assert (np.diff(wl.arrival_s) >= 0).all()
    if spec.arrival == "closed":
        assert (wl.arrival_s == 0).all()
    assert set(np.unique(wl.channels)) <= {3, 4}


def test_docs_and_4k_sizes() -> None:
    """docs: 4 x 1536x1024 RGB (the PR's microbenchmark); 4k: one 3840x2160."""
    d = generate(WorkloadSpec(family="docs", n_requests=3))
    assert (d.images_per_request == 4).all() and set(d.width) == {1536} and set(d.height) == {1024}
    k = generate(WorkloadSpec(family="4k", n_requests=3))
    assert (k.images_per_request == 1).all() and set(k.width) == {3840}


def test_has_alpha_rule() -> None:
    """semantics §3.1: RGB with a transparency key stays 3 channels; P/L with transparency and LA/RGBA become 4."""
    assert not has_alpha("RGB", False, "tuple")
    assert has_alpha("P", False, "int") and has_alpha("L", False, "int")
    assert has_alpha("LA", True, "none") and has_alpha("RGBA", True, "none")
    assert not has_alpha("CMYK", False, "none") and not has_alpha("1", False, "none")


def test_corpus_sizes_and_file_bytes() -> None:
    """The built-in manifest's 68 rows load with positive sizes and on-disk file sizes."""
    assert corpus_available(), "the built-in corpus ships with the package"
    c = load_corpus()
    assert len(c) == len(builtin_corpus.entries()) == 68
    assert (c.width > 0).all() and (c.height > 0).all() and (c.encoded_bytes > 0).all()
    rgb_tuple = [i for i, f in enumerate(c.files) if c.modes[i] == "RGB"]
    assert all(c.channels[i] == 3 for i in rgb_tuple)


def test_corpus_workload_carries_file_bytes() -> None:
    wl = generate(WorkloadSpec(family="corpus", n_requests=10, seed=1))
    assert (wl.encoded_bytes > 0).all()
