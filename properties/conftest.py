"""Shared pytest setup: Hypothesis profiles, markers, device selection, the ``--impl`` seam and verdicts.

Profiles (``--hypothesis-profile NAME``): ``dev`` fast and random; ``ci``
derandomized, no deadline, blobs printed, >= 200 examples per property;
``thorough`` >= 5,000 examples. CI sets ``CI=true``, which makes Hypothesis
load ``ci`` by itself; we register our own ``ci`` so the count is ours.

``--impl NAME|module:object`` picks the implementation under test (the
session fixture ``impl``; ``properties/SEAM.md``). Every run writes
``properties/results/verdicts.json`` (or under ``$DEFERLAB_RESULTS_DIR``):
each process (each xdist worker) writes a part file at session end and the
controller merges them atomically (``properties/verdicts.py``).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from deferlab.properties import seam, seam_sglang, verdicts

settings.register_profile("dev", max_examples=30, deadline=None)
settings.register_profile(
    "ci",
    max_examples=200,
    derandomize=True,
    deadline=None,
    print_blob=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "thorough",
    max_examples=5000,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


def _cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:  # pragma: no cover - torch missing is a setup error reported elsewhere
        return False


MARKERS = (
    "claim(id): a claim test of claims.toml; its `policy` is parametrized from the claim's expectations",
    "policies(*names): a seam property run under these policies (the real-code label under --sglang)",
    "bench: pytest-benchmark benchmarks (deselected unless -m selects them, e.g. -m bench)",
    "cuda: needs a CUDA device (skipped without one)",
    "slow: takes more than a few seconds",
)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _real(config):
        # Real code: the claim tests, whose verdicts are findings. The other tests check deferlab itself, or
        # one modelled policy (e.g. the PR's "cannot mix" error), or are properties whose failure on real code
        # would be a finding without a verdict to record it under.
        off = [item for item in items if item.get_closest_marker("claim") is None]
        if off:
            config.hook.pytest_deselected(items=off)
            items[:] = [item for item in items if item.get_closest_marker("claim") is not None]
    _mark_and_skip(config, items)


def _mark_and_skip(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``device=cuda`` runs carry the ``cuda`` mark; benchmarks run only when ``-m`` asks; CUDA skips without one.

    Done here rather than in pyproject.toml so the installed suite (no ini
    file) behaves as the checkout does; ``tryfirst`` so ``-m cuda`` selects
    the marks added here.
    """
    for item in items:
        spec = getattr(item, "callspec", None)
        if spec is not None and spec.params.get("device") == "cuda":
            item.add_marker(pytest.mark.cuda)
    if not config.getoption("markexpr", ""):
        benches = [item for item in items if "bench" in item.keywords]
        if benches:
            config.hook.pytest_deselected(items=benches)
            items[:] = [item for item in items if "bench" not in item.keywords]
    if _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (none here)")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(params=["cpu", "cuda"])
def device(request: pytest.FixtureRequest) -> str:
    """Run a test on the CPU, and on CUDA too when one is present."""
    return request.param


# --- The implementation seam and the verdict recorder (properties/SEAM.md) -----------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--impl",
        action="store",
        default=seam.DEFAULT_IMPL,
        help=f"implementation under test: a registered name ({', '.join(seam.REGISTRY)}) or module:object",
    )
    parser.addoption(
        "--sglang",
        action="store",
        default=None,
        metavar="SPEC",
        help="check real SGLang instead: 'installed', a checkout path, or a released version such as 0.5.23 "
        "(only the tests that take the `impl` fixture run; claim verdicts are recorded under 'SGLANG')",
    )


def _real(config: pytest.Config) -> bool:
    return config.getoption("--sglang", None) is not None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``policy`` of a ``claim``-marked test: each policy claims.toml has an expectation for, or the real-code
    label under ``--sglang``; of a ``policies``-marked test: the listed ones (the label under ``--sglang``)."""
    if "policy" not in metafunc.fixturenames:
        return
    claim = metafunc.definition.get_closest_marker("claim")
    listed = metafunc.definition.get_closest_marker("policies")
    if claim is None and listed is None:
        return
    if _real(metafunc.config):
        names = [seam_sglang.LABEL]
    elif claim is not None:
        names = list(verdicts.load_claims()[claim.args[0]].expected)
    else:
        names = list(listed.args)
    metafunc.parametrize("policy", names)


def _parts_dir(config: pytest.Config) -> Path:
    run_id = getattr(config, "workerinput", {}).get("deferlab_run_id") or config.stash[_RUN_ID]
    return verdicts.RESULTS_DIR / "parts" / run_id


_RUN_ID = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    for marker in MARKERS:
        config.addinivalue_line("markers", marker)
    # The oracle must never warn (an overflow or invalid operation in NumPy is a bug there, not noise).
    config.addinivalue_line("filterwarnings", "error::RuntimeWarning:reference.*")
    if not hasattr(config, "workerinput"):
        config.stash[_RUN_ID] = uuid.uuid4().hex[:12]


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:  # xdist controller: tell each worker where to write its part
    node.workerinput["deferlab_run_id"] = node.config.stash[_RUN_ID]


@pytest.fixture(scope="session")
def impl(request: pytest.FixtureRequest) -> seam.Recording:
    """The implementation under test (``--impl``, default deferlab's torch model; ``--sglang SPEC``: real SGLang),
    noting which methods each test calls (their provenance goes beside any claim verdict it records)."""
    spec = request.config.getoption("--sglang")
    if spec is not None:
        chosen = seam_sglang.SGLangSeam(spec)
        verdicts.RECORDER.system = chosen.describe()
    else:
        chosen = seam.resolve_impl(request.config.getoption("--impl"))
    seam.ACTIVE = seam.Recording(chosen)
    return seam.ACTIVE


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Each test starts with an empty record of the implementation methods it called."""
    if seam.ACTIVE is not None:
        seam.ACTIVE.reset()


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_runtest_call(item: pytest.Item):
    """Count the examples Hypothesis ran, chaining to whatever collector the Hypothesis plugin set."""
    from hypothesis.statistics import collector

    previous = collector.value

    def note(stats: dict) -> None:
        item._deferlab_examples = _count_examples(stats)
        if previous is not None:
            previous(stats)

    with collector.with_value(note):
        yield


def _count_examples(stats: dict) -> int | None:
    try:
        return sum(
            1
            for phase in ("explicit", "reuse", "generate", "target")
            for case in stats.get(f"{phase}-phase", {}).get("test-cases", [])
            if case.get("status") == "valid"
        )
    except (AttributeError, TypeError):  # the stats format is not a stable API; never fail a run on it
        return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = (yield).get_result()
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        verdicts.RECORDER.record_property(
            item.nodeid, getattr(item, "_deferlab_examples", None), report.outcome, report.duration
        )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    parts = _parts_dir(config)
    worker = getattr(config, "workerinput", {}).get("workerid")
    verdicts.RECORDER.write_part(parts, worker or "controller")
    if worker is None:  # the controller, or the only process without xdist: merge after every worker wrote
        profile = config.getoption("hypothesis_profile", None) or settings.get_current_profile_name()
        real = config.getoption("--sglang")
        out = verdicts.merge_directory(
            parts,
            verdicts.RESULTS_DIR / "verdicts.json",
            profile=str(profile),
            impl=f"sglang:{real}" if real is not None else config.getoption("--impl"),
            labels=[seam_sglang.LABEL] if real is not None else None,
        )
        if out is not None:
            config._deferlab_verdicts = json.loads(out.read_text())  # for a terminal summary line


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    doc = getattr(config, "_deferlab_verdicts", None)
    if not doc:
        return
    counts: dict[str, int] = {}
    for row in doc["claims"]:
        counts[row["verdict"]] = counts.get(row["verdict"], 0) + 1
    summary = ", ".join(f"{v} {n}" for v, n in sorted(counts.items()))
    terminalreporter.write_line(
        f"deferlab verdicts ({time.strftime('%H:%M:%S')}): {summary} -> {verdicts.RESULTS_DIR}/verdicts.json"
    )
