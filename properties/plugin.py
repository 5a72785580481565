"""deferlab's pytest plugin (entry point ``pytest11: deferlab``): the ``--impl`` and ``--sglang`` options, the
markers, the Hypothesis profiles and the ``impl`` fixture, in every pytest session once deferlab is installed.

So a user's own repository can run its tests against the implementation the
command line names::

    def test_mine(impl):  # deferlab's torch model, or --impl NAME|module:object, or --sglang SPEC
        ...

Inert in a session that uses none of it (as Hypothesis's plugin is): loading
it imports nothing beyond pytest; the ``impl`` fixture imports the seam (and
torch) only when a test asks for it; the profiles ``dev``, ``ci`` and
``thorough`` are registered only when ``--hypothesis-profile`` is given (and
then loaded by Hypothesis itself, not here). It writes no file, deselects and
skips nothing and adds no warning filter. What is deferlab's own suite's (the
verdict recorder, the claim parametrisation, the default profile, benchmark
deselection, the CUDA skip) lives in ``properties/conftest.py``, which loads
only when that suite is collected.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

MARKERS = (
    "claim(id): a claim test of claims.toml; its `policy` is parametrized from the claim's expectations",
    "policies(*names): a seam property run under these policies (the real-code label under --sglang)",
    "bench: pytest-benchmark benchmarks (deselected in deferlab's suite unless -m selects them, e.g. -m bench)",
    "cuda: needs a CUDA device (skipped in deferlab's suite without one)",
    "slow: takes more than a few seconds",
)

_PROFILES_REGISTERED = False


def register_profiles() -> None:
    """Register (not load) the Hypothesis profiles: ``dev`` fast and random; ``ci`` derandomized, no deadline,
    blobs printed, >= 200 examples per property; ``thorough`` >= 5,000 examples. Idempotent."""
    global _PROFILES_REGISTERED
    if _PROFILES_REGISTERED:
        return
    from hypothesis import HealthCheck, settings

    slow = [HealthCheck.too_slow, HealthCheck.data_too_large]
    settings.register_profile("dev", max_examples=30, deadline=None)
    settings.register_profile(
        "ci",
        max_examples=200,
        derandomize=True,
        deadline=None,
        print_blob=True,
        database=None,
        suppress_health_check=slow,
    )
    settings.register_profile("thorough", max_examples=5000, deadline=None, print_blob=True, suppress_health_check=slow)
    _PROFILES_REGISTERED = True


def pytest_addoption(parser: pytest.Parser) -> None:
    # Here, not in a conftest: the options must exist before the suite's conftests load (``--pyargs``, a path
    # into the installed package). Defaults stay symbolic so that loading the plugin imports nothing heavy.
    parser.addoption(
        "--impl",
        action="store",
        default=None,
        metavar="NAME",
        help="implementation under test (the `impl` fixture): a name in deferlab.properties.seam.REGISTRY "
        "(default: its DEFAULT_IMPL, deferlab's torch model) or module:object",
    )
    parser.addoption(
        "--sglang",
        action="store",
        default=None,
        metavar="SPEC",
        help="the `impl` fixture is real SGLang instead: 'installed', a checkout path, or a released version such "
        "as 0.5.23 (in deferlab's suite only the claim tests run; their verdicts are recorded under the real-code "
        "label)",
    )


@pytest.hookimpl(tryfirst=True)  # before Hypothesis's own pytest_configure loads the profile it names
def pytest_configure(config: pytest.Config) -> None:
    for marker in MARKERS:
        config.addinivalue_line("markers", marker)
    if config.getoption("hypothesis_profile", None):
        register_profiles()


def impl_spec(config: pytest.Config) -> str:
    """The ``--impl`` value, its default filled in (imports the seam: call it only when an implementation is wanted)."""
    from deferlab.properties import seam

    return config.getoption("--impl") or seam.DEFAULT_IMPL


def real_impl(spec: str | None) -> Any:
    """Real SGLang behind the seam: the driver is the seam implementation itself."""
    from deferlab.impl.sglang.driver import SGLangImpl

    return SGLangImpl(spec)


@pytest.fixture(scope="session")
def impl(request: pytest.FixtureRequest) -> Any:
    """The implementation under test (``--impl``, default deferlab's torch model; ``--sglang SPEC``: real SGLang),
    a `seam.Recording` noting which methods each test calls (their provenance goes beside any claim verdict)."""
    from deferlab.properties import seam, verdicts

    spec = request.config.getoption("--sglang")
    if spec is not None:
        chosen = real_impl(spec)
        verdicts.RECORDER.system = chosen.describe()  # in memory only; deferlab's suite writes it with its verdicts
    else:
        chosen = seam.resolve_impl(impl_spec(request.config))
    seam.ACTIVE = seam.Recording(chosen)
    return seam.ACTIVE


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Each test starts with an empty record of the implementation methods it called (if any test took ``impl``)."""
    seam = sys.modules.get("deferlab.properties.seam")
    if seam is not None and seam.ACTIVE is not None:
        seam.ACTIVE.reset()
