"""A warm interpreter for a mutation campaign's many short pytest runs on one engine, and its fork's guard.

Why: a claims run on real SGLang starts a new Python, and ~6 s of its ~8 s start is torch, its compiler
stack, sympy, pytest and Hypothesis, which no mutant changes. The server (``python -m
deferlab.properties.fork ENGINE SPEC FIFO [--probes]``, started by ``reports/mutate/fork.py`` as a child of
the campaign) loads the engine once, then *forgets* everything that is the engine's or deferlab's (their
modules, deferlab's import finders and stand-ins, the ``sys.path`` entries the load added). Each run is a
``fork`` of that state that imports the engine and deferlab afresh from disk (a mutant's file included), as
a new process would, with only third-party modules already imported.

Guard: this module is also a pytest plugin of the fork's session; its `pytest_sessionstart` loads the tree
the run names and compares the loader's record (every stand-in, bare package, failed body) with the
server's first load. If they differ (a third-party module kept state that changes how the engine loads, or
a mutant changes it) the session exits `DIFFERS` and the campaign runs that one cold, where the answer is
the truth.

Protocol (JSON lines): requests ``{"argv", "env", "cwd", "log", "spec"}`` come through FIFO (its end of input
ends the server); the server answers on stdout ``{"ready": ...}`` once, then per request ``{"pid": N}``
once forked and ``{"rc": N, "differs": bool}`` when the child ends. The child is its own process group: the
campaign kills it at a timeout, and when the server dies under it.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path
from typing import Any

DIFFERS = 86  # the fork's exit status when its load record is not the server's
BASELINE_ENV = "DEFERLAB_WARM_BASELINE"  # the fork's guard: a JSON file of the server's load record ...
GUARD_ENV = "DEFERLAB_WARM_GUARD"  # ... and "<engine> <spec>" to load and compare


def _ours(name: str, module: Any, package: str) -> bool:
    """A module the fork must import afresh: the engine's, deferlab's, or one of deferlab's stand-ins."""
    if name == package or name.startswith(package + ".") or name == "deferlab" or name.startswith("deferlab."):
        return True
    if getattr(module, "__deferlab_standin__", False):
        return True
    loader = getattr(getattr(module, "__spec__", None), "loader", None)
    return type(loader).__module__.startswith("deferlab.")


def _load(engine: str, spec: str) -> Any:
    """``spec`` loaded by the engine's sources module (`reference.system.systems.EngineFacts.sources`)."""
    from deferlab.reference.system.systems import engine as facts

    return importlib.import_module(facts(engine).sources).load(spec)


def _records(source: Any) -> list[dict[str, str]]:
    root = str(source.root)
    return [{k: v.replace(root, "<root>") for k, v in r.as_dict().items()} for r in source.importer.records]


def _warm_up(engine: str, spec: str, probes: bool) -> list[dict[str, str]]:
    """The state every fork starts from: ``spec`` loaded once (with the probes' builtin in place when the tree
    carries probes, as the run's plugin puts it there before the load), its record kept, then forgotten; with
    pytest's own start imported too. Returns the record a fork's load must match."""
    path_before = list(sys.path)
    if probes:
        from deferlab.properties.probes import install_probe

        install_probe()
    source = _load(engine, spec)
    baseline, package = _records(source), source.engine.package
    del source
    for name in [n for n, m in list(sys.modules.items()) if _ours(n, m, package)]:
        del sys.modules[name]
    sys.meta_path[:] = [f for f in sys.meta_path if not type(f).__module__.startswith("deferlab.")]
    sys.path[:] = [p for p in sys.path if p in path_before]
    sys.path_importer_cache.clear()
    import _pytest.config  # noqa: F401 - pytest's own start, warm too
    import hypothesis  # noqa: F401
    import pytest  # noqa: F401

    return baseline


def _child(request: dict[str, Any], engine: str, baseline: list[dict[str, str]]) -> int:
    """The fork: its own process group, the run's output, folder and environment, then its pytest session with
    this module as a plugin (the guard loads the engine where a new process's session has it loaded: after
    every plugin's configure)."""
    os.setpgid(0, 0)
    with open(request["log"], "ab", buffering=0) as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.path[0] = os.getcwd()  # as ``python -m pytest`` run there would have it
    base = Path(request["cwd"]) / f".warm-baseline-{os.getpid()}.json"
    base.write_text(json.dumps(baseline))
    os.environ[BASELINE_ENV], os.environ[GUARD_ENV] = str(base), f"{engine} {request['spec']}"
    import pytest

    try:
        return int(pytest.main([*request["argv"], "-p", "deferlab.properties.fork"]))
    finally:
        base.unlink(missing_ok=True)
        sys.stdout.flush()
        sys.stderr.flush()


def pytest_sessionstart(session: Any) -> None:
    """The guard, in a fork only: the engine loaded (now, if no plugin has yet) must have the server's record."""
    path, guard = os.environ.get(BASELINE_ENV), os.environ.get(GUARD_ENV)
    if not path or not guard:
        return
    engine, spec = guard.split(" ", 1)
    got, baseline = _records(_load(engine, spec)), json.loads(Path(path).read_text())
    if got != baseline:
        import pytest

        pytest.exit(f"[deferlab] warm: this load's record differs from the server's ({len(got)} vs {len(baseline)} entries)", returncode=DIFFERS)  # fmt: skip


def _say(doc: dict[str, Any]) -> None:
    sys.stdout.buffer.write((json.dumps(doc) + "\n").encode())
    sys.stdout.buffer.flush()


def serve(engine: str, spec: str, fifo: str, probes: bool = False) -> None:
    """Load ``spec``, forget it, say ready, then fork one child per request line until the FIFO's end of input."""
    requests = open(fifo, "rb")  # noqa: SIM115 - read until the campaign closes its end
    try:
        baseline = _warm_up(engine, spec, probes)
    except BaseException as e:  # noqa: BLE001 - any failure is the answer "not ready"
        return _say({"ready": False, "error": f"{type(e).__name__}: {e}"[:300]})
    _say({"ready": True, "records": len(baseline)})
    for line in requests:
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = _child(json.loads(line), engine, baseline)
            except BaseException:  # noqa: BLE001 - the child's failure is its exit status, never the server's
                import traceback

                traceback.print_exc()
            finally:
                os._exit(code)
        _say({"pid": pid})
        rc = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        _say({"rc": rc, "differs": rc == DIFFERS})


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2], sys.argv[3], "--probes" in sys.argv[4:])
