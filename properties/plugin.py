"""deferlab's pytest plugin (entry point ``pytest11: deferlab``): the ``--impl``, ``--sglang`` and ``--vllm``
options, the markers, the Hypothesis profiles and the ``impl`` and ``served_paths`` fixtures, in every pytest
session once deferlab is installed.

So a user's own repository can run its tests against the implementation the
command line names::

    def test_mine(impl):  # deferlab's torch model, or --impl NAME|module:object, or --sglang SPEC
        ...

``served_paths`` (with a ``policy`` parameter) is every path the system under
test serves the vision tower with (`reference.system.served.ServedPath`):
deferlab's model under that policy, SGLang's paths with ``--sglang``, vLLM's
one path with ``--vllm`` (loaded once per session; semantics §16).

Inert in a session that uses none of it (as Hypothesis's plugin is): loading
it imports nothing beyond pytest; the ``impl`` and ``served_paths`` fixtures
import the seam (and torch) only when a test asks for them; the profiles ``dev``, ``ci`` and
``thorough`` are registered only when ``--hypothesis-profile`` is given (and
then loaded by Hypothesis itself, not here). It writes no file, deselects and
skips nothing and adds no warning filter. What is deferlab's own suite's (the
verdict recorder, the claim parametrisation, the default profile, benchmark
deselection, the CUDA skip) lives in ``properties/conftest.py``, which loads
only when that suite is collected.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest

# reference.system.served.CHECKPOINT_ENV, not imported: the plugin stays light (test_checkpoint_config checks it)
CHECKPOINT_ENV = "DEFERLAB_CHECKPOINT"

MARKERS = (
    "claim(id): a claim test of claims.toml; its `policy` is parametrized from the claim's expectations",
    "policies(*names): a seam property run under these policies (the real-code label under --sglang)",
    "real_code: a property with no claim that also runs on real code (--sglang): it holds on every release "
    "(skipping where a release lacks the path), so its failure fails the run; a mutation campaign's P: unit",
    "bench: pytest-benchmark benchmarks (deselected in deferlab's suite unless -m selects them, e.g. -m bench)",
    "cuda: needs a CUDA device (skipped in deferlab's suite without one)",
    "slow: takes more than a few seconds",
    "extra(name): needs deferlab's optional extra NAME (reference.system.extras); skipped, naming it, without it",
    "families(which): a check of every model family ('all') or of every family but Kimi-K3 ('others'); an "
    "unmarked check is Kimi-K3's alone (--model picks the family)",
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
    for name in _engine_names():  # one option per engine plugin (reference.system.engines), named as it is
        parser.addoption(
            f"--{name}",
            action="store",
            default=None,
            metavar="SPEC",
            help=f"the system under test is real {name} instead: 'installed', a checkout path, or a released version "
            "(in deferlab's suite only the checks it answers run, recorded under its label; `deferlab families` "
            "lists the engines)",
        )
    parser.addoption(
        "--model",
        action="store",
        default=None,
        metavar="FAMILY",
        help="the model families the served claims judge (reference.system.families): one, a comma-separated list, "
        "or 'all' (default kimi-k3); each checkpoint's processor is the trained side, the engine's paths for it the "
        "served side, and a family but Kimi-K3 records under columns prefixed FAMILY:",
    )
    parser.addoption(
        "--checkpoint",
        action="store",
        default=None,
        metavar="DIR",
        help="a downloaded model snapshot: its preprocessor_config.json (fill stage included) is the config the "
        "served-vs-trained claims run under (also read from DEFERLAB_CHECKPOINT; default the kimi-k3 profile)",
    )


@pytest.hookimpl(tryfirst=True)  # before Hypothesis's own pytest_configure loads the profile it names
def pytest_configure(config: pytest.Config) -> None:
    given = [f"--{name}" for name in _engine_names() if config.getoption(f"--{name}", None) is not None]
    if len(given) > 1:
        raise pytest.UsageError(f"{' and '.join(given)} name {len(given)} systems under test; give one of them")
    model = config.getoption("--model", None)
    if model is not None:
        from deferlab.reference.system.families import FAMILIES

        unknown = [m for m in str(model).split(",") if m.strip() not in FAMILIES and m.strip() != "all"]
        if unknown:
            raise pytest.UsageError(
                f"--model: unknown model family {unknown[0]!r}; accepted: {', '.join(FAMILIES)}, a comma-separated "
                "list of them, or all"
            )
    checkpoint = config.getoption("--checkpoint", None)
    if checkpoint is not None:  # one place the served claims read it, in this process and its children
        os.environ[CHECKPOINT_ENV] = str(checkpoint)
    for marker in MARKERS:
        config.addinivalue_line("markers", marker)
    if config.getoption("hypothesis_profile", None):
        register_profiles()


def _engine_names() -> list[str]:
    """The engine plugins' names, read off the ``deferlab.engines`` entry points without importing any of them (the
    plugin stays inert): each engine's option is ``--NAME`` (`EngineFacts.option`)."""
    from importlib.metadata import entry_points

    return sorted({ep.name for ep in entry_points(group="deferlab.engines")})


def _engines() -> dict[str, Any]:
    """The engine plugins (`reference.system.engines`: plain data, no engine code is imported)."""
    from deferlab.reference.system.engines import ENGINES

    return ENGINES


def session_engine(config: pytest.Config) -> tuple[Any, str] | None:
    """(`EngineFacts`, spec) of the real engine the command line names (its option), or None: deferlab's model."""
    for facts in _engines().values():
        spec = config.getoption(facts.option, None)
        if spec is not None:
            return facts, str(spec)
    return None


def families_of(config: pytest.Config) -> list[str]:
    """The session's model families (``--model``: one, a comma-separated list, or ``all``; default Kimi-K3), in
    the registry's order: one engine load judges every family named."""
    from deferlab.reference.system.families import FAMILIES

    asked = [m.strip() for m in str(config.getoption("--model", None) or "kimi-k3").split(",") if m.strip()]
    return list(FAMILIES) if "all" in asked else [f for f in FAMILIES if f in asked]


def impl_spec(config: pytest.Config) -> str:
    """The ``--impl`` value, its default filled in (imports the seam: call it only when an implementation is wanted)."""
    from deferlab.properties import seam

    return config.getoption("--impl") or seam.DEFAULT_IMPL


def real_impl(spec: str | None, companions: tuple[str, ...] = ()) -> Any:
    """Real SGLang behind the seam: the driver is the seam implementation itself, its release loaded with the
    ``companions`` the session's families compute with (`properties.served.sglang_companions`)."""
    from deferlab.impl.sglang.driver import SGLangImpl

    if not companions:
        return SGLangImpl(spec)
    from deferlab.impl.sglang.sources import load

    return SGLangImpl(load(spec or "installed", companions=companions))


@pytest.fixture(scope="session")
def impl(request: pytest.FixtureRequest) -> Any:
    """The implementation under test (``--impl``, default deferlab's torch model; ``--sglang SPEC``: real SGLang),
    a `seam.Recording` noting which methods each test calls (their provenance goes beside any claim verdict)."""
    from deferlab.properties import seam, verdicts

    found = session_engine(request.config)
    if found is not None and not found[0].seam:
        facts = found[0]
        pytest.skip(f"{facts.option}: {facts.display} has no seam implementation, only its served paths (the "
                    "`served_paths` fixture)")  # fmt: skip
    spec = found[1] if found is not None else None
    if spec is not None:
        from deferlab.properties.served import sglang_companions

        chosen = real_impl(spec, sglang_companions(families_of(request.config)))
        verdicts.RECORDER.system = chosen.describe()  # in memory only; deferlab's suite writes it with its verdicts
    else:
        chosen = seam.resolve_impl(impl_spec(request.config))
    seam.ACTIVE = seam.Recording(chosen)
    return seam.ACTIVE


@pytest.fixture(scope="session")
def served_session(request: pytest.FixtureRequest) -> Any:
    """The session's `properties.served.Session`: the engine named on the command line is loaded once here, and
    its paths for each family of the session (``--model``) are built when a column of that family first asks;
    under ``--vllm`` the loaded source is also the session's real-code implementation (`seam.ACTIVE`), as
    ``impl`` is SGLang's under ``--sglang``, so verdicts record under their columns with the system that ran."""
    from deferlab.properties import seam, served, verdicts

    found = session_engine(request.config)
    if found is None:
        return served.Session()  # deferlab's model, per policy (Kimi-K3's pipeline only)
    facts, spec = found
    if facts.seam:  # the engine behind the seam: its paths over the session's `impl` (traced)
        return served.sglang_session(request.getfixturevalue("impl"))
    session = served.engine_session(facts, spec, families_of(request.config))
    verdicts.RECORDER.system = session.describe()
    seam.ACTIVE = seam.Recording(session.anchor)
    return session


@pytest.fixture
def model_family(policy: str) -> str:
    """The model family of the test's column (``FAMILY:LABEL``; a bare label or policy is Kimi-K3's)."""
    from deferlab.reference.system.rows import Column

    return Column.parse(policy).family_name


@pytest.fixture
def served_paths(served_session: Any, policy: str) -> list[Any]:
    """Every `ServedPath` of the system under test, for ``policy`` (the model's) or the engine's one label."""
    return served_session.paths(policy)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Each test starts with an empty record of the implementation methods it called (if any test took ``impl``)."""
    seam = sys.modules.get("deferlab.properties.seam")
    if seam is not None and seam.ACTIVE is not None:
        seam.ACTIVE.reset()
