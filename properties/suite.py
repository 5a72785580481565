"""deferlab's own suite, as a pytest plugin both test trees load: the default Hypothesis profile, device
selection, the claim parametrisation, the verdict recorder and the strict switch.

Loaded by ``pytest_plugins`` from ``properties/conftest.py`` (the shipped checks) and ``tests/conftest.py``
(deferlab's own tests), so a session over both registers it once. The options (``--impl``, ``--sglang``,
``--vllm``), the markers, the profiles and the ``impl`` and ``served_paths`` fixtures are the public pytest
plugin's (``properties/plugin.py``, the ``pytest11`` entry point ``deferlab``), so they exist in any session;
what is here applies only when one of the two trees is collected.

Profiles (``--hypothesis-profile NAME``): ``dev`` fast and random; ``ci`` derandomized, no deadline, blobs
printed, >= 200 examples per property; ``thorough`` >= 5,000 examples. Without the option the suite loads
``$HYPOTHESIS_PROFILE``, else ``ci`` when ``CI`` is set, else ``dev`` (the report and the README's test
command name ``ci``, derandomized: the same code gives the same verdicts on every run).

Every run writes ``verdicts.json`` (under ``$DEFERLAB_RESULTS_DIR``, default ``properties/results``): each
process (each xdist worker) writes a part file at session end and the controller merges them atomically
(``properties/verdicts.py``), with every test's outcome and, for one that failed, its failure line.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from deferlab.properties import plugin, verdicts
from deferlab.reference.system import extras, families
from deferlab.reference.system.claims import claims_by_property, load_claims
from deferlab.reference.system.engines import engine_of_label
from deferlab.reference.system.seam import SGLANG_LABEL
from deferlab.reference.system.systems import DEFAULT_FAMILY, family_column, path_label


def _cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:  # pragma: no cover - torch missing is a setup error reported elsewhere
        return False


def claim_of(item_or_definition: Any) -> str | None:
    """The claim a test checks: its ``claim`` marker, else the claim whose claims.toml ``property`` it is (path
    relative to the shipped checks, ``::``, the function's name); None for a test of no claim."""
    mark = item_or_definition.get_closest_marker("claim")
    if mark is not None:
        return str(mark.args[0])
    try:
        rel = Path(item_or_definition.path).resolve().relative_to(SUITE_ROOT).as_posix()
    except ValueError:
        return None  # not a shipped check (deferlab's own tests, a user's)
    name = getattr(item_or_definition, "originalname", None) or item_or_definition.name.split("[", 1)[0]
    return claims_by_property().get(f"{rel}::{name}")


SUITE_ROOT = Path(verdicts.__file__).resolve().parent  # the shipped checks, the root of claims.toml's properties


def _mark_claims(items: list[pytest.Item]) -> None:
    """Give every claims.toml ``property`` its ``claim`` marker (a test that names its claim keeps its own), so the
    recorder and the real-code selection read the claim from the marker, never from the test's name."""
    for item in items:
        if item.get_closest_marker("claim") is None:
            cid = claim_of(item)
            if cid is not None:
                item.add_marker(pytest.mark.claim(cid))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _mark_claims(items)
    if _real(config):
        # Real code: the claim tests, whose verdicts are findings, and the properties marked `real_code` (no
        # verdict: they hold on every release, so a failure is the run's; they are what a mutation campaign's
        # property units are). The other tests check deferlab itself, or one modelled policy (e.g. the PR's
        # "cannot mix" error), or are properties whose failure on real code would be a finding without a
        # verdict to record it under.
        keep = [item for item in items if item.get_closest_marker("claim") or item.get_closest_marker("real_code")]
        off = [item for item in items if item not in keep]
        if off:
            config.hook.pytest_deselected(items=off)
            items[:] = keep
    _keep_the_familys(config, items)
    found = plugin.session_engine(config)
    if found is not None and not found[0].seam:
        # an engine without a seam (vLLM, LMDeploy) runs only what it serves (C13-C15, the `served_paths` claims):
        # C1-C12 are about SGLang's PR #33921 (its gate, deferred items, owners, transports) and ask the seam's impl
        off = [item for item in items if "served_paths" not in getattr(item, "fixturenames", ())]
        if off:
            config.hook.pytest_deselected(items=off)
            items[:] = [item for item in items if item not in off]
    _mark_and_skip(config, items)


def test_families(item_or_definition: Any, config: pytest.Config) -> list[str]:
    """The session's families a check applies to (``--model``): an unmarked check is Kimi-K3's alone;
    ``families("all")`` runs for every family, ``families("others")`` for every family but Kimi-K3 (whose C13-C15
    are ``test_served.py``'s)."""
    session = plugin.families_of(config)
    mark = item_or_definition.get_closest_marker("families")
    if mark is None:
        return [f for f in session if f == DEFAULT_FAMILY]
    return [f for f in session if mark.args[0] == "all" or f != DEFAULT_FAMILY]


def _keep_the_familys(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the checks of no family of the session (`test_families`)."""
    off = [item for item in items if not test_families(item, config)]
    if off:
        config.hook.pytest_deselected(items=off)
        items[:] = [item for item in items if test_families(item, config)]


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
    _skip_missing_extras(items)
    if _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (none here)")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


def _skip_missing_extras(items: list[pytest.Item]) -> None:
    """A test marked ``extra(NAME)`` skips, with the one line naming the extra, where it is not installed (the
    README's install has none: its test command must pass, the extras' tests skipping with their reason)."""
    for item in items:
        for mark in item.iter_markers("extra"):
            why = extras.why_missing(mark.args[0])
            if why is not None:
                item.add_marker(pytest.mark.skip(reason=why))
                break


@pytest.fixture(params=["cpu", "cuda"])
def device(request: pytest.FixtureRequest) -> str:
    """Run a test on the CPU, and on CUDA too when one is present."""
    return request.param


# --- The implementation seam and the verdict recorder (properties/SEAM.md) -----------------------------------------


def _real(config: pytest.Config) -> bool:
    return plugin.session_engine(config) is not None


def _label(config: pytest.Config) -> str:
    """The real-code label of the session's engine (``SGLANG``, ``VLLM``, ``LMDEPLOY``...)."""
    found = plugin.session_engine(config)
    return found[0].label if found is not None else SGLANG_LABEL


def _labels(config: pytest.Config, family: str) -> list[str]:
    """The real-code columns of ``family`` in the session: one per served path of it at the named release
    (``VLLM`` for the default path, ``VLLM host-normalized`` beside it, prefixed ``FAMILY:`` for a family but
    Kimi-K3; `reference.system.families`), read from the registry without loading the engine."""
    facts, spec = plugin.session_engine(config) or (engine_of_label(SGLANG_LABEL), "installed")
    engine = facts.name
    found = families.family(family).paths(engine, spec)
    labels = [path_label(engine, None if p.default else p.path, family) for p in found]
    return list(dict.fromkeys(labels)) or [path_label(engine, None, family)]


def _model_labels(family: str, claim: str | None, listed: Any) -> list[str]:
    """The model's columns for ``family``: claims.toml's policies for Kimi-K3 (or the listed ones), one column
    for a family it does not serve (its n/a)."""
    if family != DEFAULT_FAMILY:
        return [family_column("RELEASED", family)]
    if claim is not None:
        return list(load_claims()[claim].expected)
    return list(listed.args) if listed is not None else []


def _columns(config: pytest.Config, families_: list[str], claim: str | None, listed: Any) -> list[str]:
    if _real(config):
        return [label for f in families_ for label in _labels(config, f)]
    return [label for f in families_ for label in _model_labels(f, claim, listed)]


def session_columns(config: pytest.Config) -> list[str] | None:
    """Every verdict column of the session, for the merge (None: the model's claims.toml policies alone)."""
    session = plugin.families_of(config)
    if not _real(config) and session == [DEFAULT_FAMILY]:
        return None
    if _real(config):
        return [label for f in session for label in _labels(config, f)]
    policies = list(dict.fromkeys(p for c in load_claims().values() for p in c.expected))
    others = [family_column("RELEASED", f) for f in session if f != DEFAULT_FAMILY]
    return [*(policies if DEFAULT_FAMILY in session else []), *others]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``policy`` of a ``claim``-marked test: a column per family the test applies to (`test_families`): each
    policy claims.toml has an expectation for (the model, Kimi-K3), the real-code columns under ``--sglang`` /
    ``--vllm``; of a ``policies``-marked test: the listed ones (the label then)."""
    if "policy" not in metafunc.fixturenames:
        return
    claim = claim_of(metafunc.definition)  # its marker, else claims.toml's `property` (`_mark_claims` marks it)
    listed = metafunc.definition.get_closest_marker("policies")
    if claim is None and listed is None:
        return
    found = test_families(metafunc.definition, metafunc.config)
    names = _columns(metafunc.config, found, claim, listed)
    metafunc.parametrize("policy", names)


def _parts_dir(config: pytest.Config) -> Path:
    run_id = getattr(config, "workerinput", {}).get("deferlab_run_id") or config.stash[_RUN_ID]
    return verdicts.RESULTS_DIR / "parts" / run_id


_RUN_ID = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    # The suite's default profile; a --hypothesis-profile given wins (Hypothesis loads it; the plugin registered it).
    # A hook rather than import time, so a conftest loaded late (--pyargs) does not override the option.
    plugin.register_profiles()
    if not config.getoption("hypothesis_profile", None):
        settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))
    # The oracle must never warn (an overflow or invalid operation in NumPy is a bug there, not noise). The filter's
    # module is a regex matched from the start of the warning's module name, which carries the package prefix.
    config.addinivalue_line("filterwarnings", r"error::RuntimeWarning:deferlab\.reference\.")
    if not hasattr(config, "workerinput"):
        config.stash[_RUN_ID] = uuid.uuid4().hex[:12]
    verdicts.RECORDER.family = ",".join(plugin.families_of(config))


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:  # xdist controller: tell each worker where to write its part
    node.workerinput["deferlab_run_id"] = node.config.stash[_RUN_ID]


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
        outcome = "error" if report.when == "setup" and report.failed else report.outcome
        verdicts.RECORDER.record_property(
            item.nodeid,
            getattr(item, "_deferlab_examples", None),
            outcome,
            report.duration,
            failure_line(report),
            claim=claim_of(item),
        )


def failure_line(report: pytest.TestReport) -> str:
    """A test report's one line: "" when it passed; a failure's crash message (its first line, as pytest's own
    summary shows it); a skip's reason."""
    if report.passed:
        return ""
    crash = getattr(getattr(report.longrepr, "reprcrash", None), "message", None)
    if crash is not None:
        text = str(crash)
    elif isinstance(report.longrepr, tuple) and len(report.longrepr) == 3:  # a skip: (path, line, reason)
        text = str(report.longrepr[2]).removeprefix("Skipped: ")
    else:
        text = str(report.longrepr or "")
    return next((line.strip() for line in text.splitlines() if line.strip()), "")[:400]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    parts = _parts_dir(config)
    worker = getattr(config, "workerinput", {}).get("workerid")
    verdicts.RECORDER.write_part(parts, worker or "controller")
    if worker is None:  # the controller, or the only process without xdist: merge after every worker wrote
        profile = config.getoption("hypothesis_profile", None) or settings.get_current_profile_name()
        engine, real = (found[0].name, found[1]) if (found := plugin.session_engine(config)) else (None, None)
        out = verdicts.merge_directory(
            parts,
            verdicts.RESULTS_DIR / "verdicts.json",
            profile=str(profile),
            impl=f"{engine}:{real}" if real is not None else plugin.impl_spec(config),
            labels=session_columns(config),
            strict=verdicts.strict(),
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


@pytest.fixture(autouse=True)
def _no_ci_job_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test appends to the CI job's real summary: the suite runs ``report``, ``versions`` and ``compare``,
    which append to ``$GITHUB_STEP_SUMMARY`` when it is set; a test that checks that sets its own file."""
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
