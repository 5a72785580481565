"""The harnesses of ``deferlab mutate``'s tests: the fake engines' scripts in place of the checks, through the one
runner (`reports.core.runner.run`, its `RunRecord` read from the results file the script writes).

``python fakes.py ARGS...`` is ``deferlab mutate ARGS...`` (`reports.cli.main`) with the fake SGLang's harness,
and ``python fakes.py fork TREE TEST`` a command that runs the hanging ``TEST`` forked from a warm server for
``TREE`` (`reports.mutate.fork`): the tests that stop them with SIGTERM run them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from deferlab.impl.loader.__main__ import ERROR_MARK, LOAD_FAILED
from deferlab.reference.system.systems import DEFAULT_FAMILY
from deferlab.reports.core import process
from deferlab.reports.core.runner import LoadError, Request
from deferlab.reports.mutate.runs import Harness, last_line

HERE = Path(__file__).resolve().parent
FAKE = HERE / "python"
VLLM_FAKE = HERE / "vllm_tree"


class FakeHarness(Harness):
    """The fake SGLang's ``claims.py`` in place of ``pytest <claim tests> --sglang TREE``; counts its runs
    (the node ids of each run that is not a collection). ``die``: every mutant run is killed by a signal."""

    script = HERE / "claims.py"
    probed = ["sglang.srt.gate"]

    def __init__(self, engine: str = "sglang", *, die: bool = False) -> None:
        super().__init__(engine, "ci", launcher=self.launch, warm=False)
        self.runs: list[list[str]] = []
        self.die = die

    def modules(self) -> list[str]:
        return list(self.probed)

    def launch(self, request: Request, cmd: list[str], env: dict[str, str], cwd: Path, log: Path) -> process.Finished:
        nodes = [n.removeprefix(f"{HERE}/") for n in request.nodes]
        argv = [sys.executable, str(self.script), f"--{self.engine}", str(request.system.spec)]
        argv += ["--model", request.system.family] if request.system.family != DEFAULT_FAMILY else []
        if request.collect_only:
            argv.append("--collect-only")
        else:
            self.runs.append(nodes)
            argv += ["--die"] if self.die and not request.env else nodes
        return process.run(argv, env=env, cwd=cwd, log=log, timeout=request.timeout)

    def check(self, tree: Path | str, timeout: float) -> None:
        rc, _, err = process.capture([sys.executable, str(self.script), "--load", str(tree)], timeout=timeout)
        if rc:
            raise LoadError(last_line(err))

    def with_engine(self, tree: Path, args: Sequence[str], cwd: Path, timeout: float, env: dict[str, str]) -> Any:
        cmd = [sys.executable, str(HERE / "load_tree.py"), str(tree), "--", *args]
        rc, out, err = process.capture(cmd, env={**os.environ, **env}, cwd=cwd, timeout=timeout)
        failed = [x for x in err.splitlines() if x.startswith(ERROR_MARK)]
        if rc == LOAD_FAILED and failed:
            raise LoadError(failed[-1][len(ERROR_MARK) :])
        return rc, out, err


class FakeVLLMHarness(FakeHarness):
    """The fake vLLM's ``claims_vllm.py`` in place of its served claims with ``--vllm TREE``."""

    script = HERE / "claims_vllm.py"
    probed = ["vllm.multimodal.served"]

    def __init__(self) -> None:
        super().__init__("vllm")


def descendants(root: int) -> list[str]:
    """Every live process whose parent chain leads to ``root`` (from /proc), as "pid cmdline"."""
    parent, cmd = {}, {}
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
            parent[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
            cmd[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (ValueError, OSError, IndexError):
            continue
    out = []
    for pid in parent:
        p = pid
        while p in parent and p not in (root, 0, 1):
            p = parent[p]
        if p == root and pid != root:
            out.append(f"{pid} {cmd[pid][:120]}")
    return out


def still_running(listed: list[str], wait: float = 5.0) -> list[str]:
    """Those of ``listed`` (`descendants`' lines) still running after at most ``wait`` seconds (a zombie, killed and
    not yet reaped by init, is not running)."""
    import time

    def running(line: str) -> bool:
        try:
            return Path(f"/proc/{line.split()[0]}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except (OSError, IndexError):
            return False

    deadline = time.monotonic() + wait
    while any(running(x) for x in listed) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [x for x in listed if running(x)]


def fork(tree: str, test: str) -> int:
    """``test`` forked from a warm server for ``tree``, inside the CLI's `process.stopped` (143 on SIGTERM)."""
    from deferlab.reports.mutate.fork import Server

    work = Path(test).parent
    try:
        with process.stopped():
            server = Server("sglang", tree, work)
            print("forking", flush=True)
            argv = [test, "-q", "-p", "no:cacheprovider", "--noconftest", "-c", os.devnull, "--rootdir", str(work)]
            server.run(argv, env=dict(os.environ), cwd=work, log=work / "log.txt", timeout=600, spec=tree)
    except process.Stopped:
        return 143
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "fork":
        sys.exit(fork(sys.argv[2], sys.argv[3]))
    from deferlab.reports import cli
    from deferlab.reports.mutate import cli as mutate_cli

    mutate_cli.harness_for = lambda engine, profile: FakeHarness(engine)
    sys.exit(cli.main(sys.argv[1:]))
