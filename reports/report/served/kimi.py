"""An engine's Kimi-K3 paths in a child process of their own: the report's load check, paths, sweep and skew table.

Why a child: an engine's release is loaded by deferlab's loader into the process that asks for it, and a process
holds one copy for good (its modules cannot be unloaded); the report's process must load none (issue 29, item 4),
so each engine the report names gets one child, which loads its paths once and answers the report's Kimi-K3 steps
in turn (the ``paths`` step: what the paths are; ``sweeps:geometry``: C13 exhaustive over them, one geometry at a
time; ``served``: their skew-table columns), instead of loading the release again for each step:

    python -m deferlab.reports.report.served.kimi serve ENGINE SPEC   # requests on stdin, one JSON a line
    python -m deferlab.reports.report.served.kimi check ENGINE SPEC   # the front door's load check (`check`)

Each answer is a results file the child writes atomically (JSON of plain values; the skew columns as
`reports.report.served.tables_file`: fields and arrays, no pickle), its path on one `DONE` line of the child's
stdout; the progress lines the steps print come back as `SAY` lines, a failure as one `FAILED` line. The engine's
own output (and a traceback) goes to the child's stderr, its log. The report reaches the children only through
`reports.report.served.paths.RunPaths`, one engine after another through the one executor (`reports.core.executor.each`).
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TextIO

from deferlab.reference.system import engines
from deferlab.reference.system.config import PreprocessConfig
from deferlab.reports.core.atomic import write_text_atomic
from deferlab.reports.report.served.skew import one_line

SAY, DONE, FAILED = "deferlab-kimi-say: ", "deferlab-kimi-done: ", "deferlab-kimi-failed: "
MODULE = "deferlab.reports.report.served.kimi"


class ChildFailed(RuntimeError):
    """The child refused a request (its one line), or ended without answering (its log's last line)."""


@dataclass(frozen=True)
class RemotePath:
    """What the report's process knows of one of an engine's Kimi-K3 paths: its identity (the skew table's
    column head, the sweep's record), never its code, which stays in the engine's child."""

    engine: str
    name: str
    label: str
    path: str
    system: str
    dtype: str
    real_code: bool


def config_request(cfg: PreprocessConfig) -> dict[str, Any]:
    """``cfg`` as a request carries it (`config_of` rebuilds it, name and all)."""
    return {"config": cfg.to_media_proc_cfg(), "config_name": cfg.name}


def config_of(request: dict[str, Any]) -> PreprocessConfig:
    return PreprocessConfig.from_media_proc_cfg(request["config"], name=request["config_name"])


def kimi_paths(engine: str, spec: str, media_proc_cfg: dict[str, Any] | None = None) -> list[Any]:
    """``engine`` ``spec``'s Kimi-K3 paths, loaded in this process through its plugin's hooks (``kimi_paths``:
    this module names no engine's package): what the engine's child runs (`serve`), and the tests (as
    `reports.report.served.paths.kimi_paths`); the checkpoint oracle is handed in for the releases serving its remote code (impl never imports it)."""
    from deferlab.reference.oracle import checkpoint

    return list(importlib.import_module(engines.engine(engine).hooks).kimi_paths(spec, media_proc_cfg, checkpoint))


def describe_systems(paths: list[Any]) -> dict[str, Any]:
    """engine -> what the first of its real paths describes (``describe()``), in the paths' order."""
    out: dict[str, Any] = {}
    for p in paths:
        owner = p if hasattr(p, "describe") else getattr(p, "impl", None)
        facts = engines.engine_of_label(str(p.label))
        if p.real_code and hasattr(owner, "describe"):
            out.setdefault(facts.name if facts is not None else "sglang", owner.describe())
    return out


class Worker:
    """The report's handle on one engine's child: started by `load`, asked by `ask`, ended by `close` (or when
    the report's process ends: the child ends at the end of its input)."""

    def __init__(self, engine: str, spec: str) -> None:
        self.engine, self.spec = engine, spec
        self.proc: subprocess.Popen | None = None
        self.log: Path | None = None

    def start(self, media_proc_cfg: dict[str, Any] | None, threads: int | None) -> None:
        """Start the child and hand it the load (the engines load side by side); `loaded` waits for it."""
        from deferlab.reports.core import process

        self.log = process.temp_dir("kimi-") / f"kimi-{self.engine}.log"
        with open(self.log, "w") as sink:
            cmd = [sys.executable, "-m", MODULE, "serve", self.engine, self.spec]
            self.proc = process.spawn(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=sink, text=True)
        self.send({"do": "load", "media_proc_cfg": media_proc_cfg, "threads": threads})

    def loaded(self) -> dict[str, Any]:
        """The paths loaded: ``{"paths": [RemotePath fields], "systems": {...}}``; `ChildFailed` with the loader's
        one line when they cannot be loaded (the child then ended)."""
        try:
            return self.receive()
        except ChildFailed:
            self.close()
            raise

    def load(self, media_proc_cfg: dict[str, Any] | None, threads: int | None) -> dict[str, Any]:
        """`start`, then `loaded`."""
        self.start(media_proc_cfg, threads)
        return self.loaded()

    def ask(self, request: dict[str, Any], say: Callable[[str], None] | None = None) -> dict[str, Any]:
        """Send one request and wait for its answer (`send`, then `receive`)."""
        self.send(request)
        return self.receive(say)

    def send(self, request: dict[str, Any]) -> None:
        """Hand the child one request; it works on it while this process does its own part."""
        proc = self.proc
        if proc is None or proc.stdin is None:
            raise ChildFailed(f"its Kimi-K3 child is not running ({self.engine} {self.spec!r})")
        try:
            proc.stdin.write(json.dumps(request) + "\n")
            proc.stdin.flush()
        except OSError:
            pass  # the child is gone: its last words are read by `receive`

    def receive(self, say: Callable[[str], None] | None = None) -> dict[str, Any]:
        """The answer to the request sent last (its results file read back), the child's progress lines relayed to
        ``say`` on the way; `ChildFailed` with its one line, or its log's last line when it ended."""
        proc = self.proc
        if proc is None or proc.stdout is None:
            raise ChildFailed(f"its Kimi-K3 child is not running ({self.engine} {self.spec!r})")
        for line in proc.stdout:
            line = line.rstrip("\n")
            if line.startswith(SAY):
                (say or (lambda _m: None))(line[len(SAY) :])
            elif line.startswith(DONE):
                return read_answer(Path(line[len(DONE) :]))
            elif line.startswith(FAILED):
                raise ChildFailed(line[len(FAILED) :])
        raise ChildFailed(f"the Kimi-K3 child of {self.engine} {self.spec!r} ended ({self._last_words()})")

    def _last_words(self) -> str:
        code = self.proc.poll() if self.proc is not None else None
        lines = [x for x in self.log.read_text(errors="replace").splitlines() if x.strip()] if self.log else []
        return f"exit status {code}" + (f": {lines[-1][:200]}" if lines else "")

    def close(self) -> None:
        """End the child (the end of its input, then its group killed if it lingers) and forget it."""
        from deferlab.reports.core import process

        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            pass
        finally:
            if proc.stdout is not None:
                proc.stdout.close()
            process.reap(proc)


def read_answer(out: Path) -> dict[str, Any]:
    """A results file: its JSON; the skew columns (`tables_file`) rebuilt where it names them."""
    doc = json.loads(out.read_text())
    if doc.get("tables"):
        from deferlab.reports.report.served import tables_file

        doc["columns"] = tables_file.read(Path(doc["tables"]))["kimi-k3"]["columns"]
    return doc


# --- the child's side ------------------------------------------------------------------------------------------------
class _Child:
    """The engine's paths loaded once, and the requests answered against them."""

    def __init__(self, engine: str, spec: str, proto: TextIO, work: Path) -> None:
        self.engine, self.spec, self.proto, self.work = engine, spec, proto, work
        self.paths: list[Any] = []
        self.answers = 0

    def say(self, message: str) -> None:
        self.proto.write(SAY + message.replace("\n", " ") + "\n")
        self.proto.flush()

    def load(self, request: dict[str, Any]) -> dict[str, Any]:
        if request.get("threads"):
            import torch

            torch.set_num_threads(int(request["threads"]))  # as the report's process: beside the claim runs
        self.paths = kimi_paths(self.engine, self.spec, request.get("media_proc_cfg"))
        fields = ("name", "label", "path", "system", "dtype", "real_code")
        return {"paths": [asdict(RemotePath(self.engine, *(getattr(p, f) for f in fields))) for p in self.paths]}

    def geometry(self, request: dict[str, Any]) -> dict[str, Any]:
        from deferlab.reports.report.sweeps.geometry import part

        return part(self.paths, config_of(request), int(request["max_side"]))

    def skew(self, request: dict[str, Any]) -> dict[str, Any]:
        from deferlab.reports.report.served import images, skew, tables_file

        samples = images.samples()
        columns = skew.skew_table(self.paths, config_of(request), samples, progress=self.say)
        tables = self.work / f"skew-{self.answers}.json"
        tables_file.write({"kimi-k3": {"columns": columns}}, tables)
        return {"tables": str(tables)}

    def answer(self, request: dict[str, Any]) -> Path:
        """Answer ``request`` into a results file: what it asked, and what the paths describe now (a path records
        what it modelled as it serves, so the report keeps the last description, as of the loaded copy)."""
        found = {"load": self.load, "geometry": self.geometry, "skew": self.skew}[request["do"]](request)
        found["systems"] = describe_systems(self.paths)
        self.answers += 1
        out = self.work / f"answer-{self.answers}.json"
        write_text_atomic(out, json.dumps(found, default=str) + "\n")
        return out


def serve(engine: str, spec: str, requests: TextIO = sys.stdin) -> int:
    """Answer ``requests`` (one JSON a line) until their end; a failed load ends the child (status 1)."""
    proto = os.fdopen(os.dup(1), "w")  # the answers' channel; the engine's own output goes to the log
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    child = _Child(engine, spec, proto, Path(tempfile.mkdtemp(prefix=f"kimi-{engine}-")))
    for line in requests:
        request = json.loads(line)
        try:
            out = child.answer(request)
        except Exception as e:  # noqa: BLE001 - the parent gets the one line, the log the traceback
            traceback.print_exc()
            proto.write(FAILED + one_line(e) + "\n")
            proto.flush()
            if request.get("do") == "load":
                return 1
            continue
        proto.write(DONE + str(out) + "\n")
        proto.flush()
    return 0


def check(engine: str, spec: str) -> int:
    """The front door's load check (`reports.report.front.load_kimi_or_refuse`): the engine's ``kimi_load``, its
    refusal on one `FAILED` line of stderr (status 1)."""
    why = importlib.import_module(engines.engine(engine).hooks).kimi_load(spec)
    if why is not None:
        print(FAILED + why, file=sys.stderr, flush=True)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    command, engine, spec = list(sys.argv[1:] if argv is None else argv)
    return serve(engine, spec) if command == "serve" else check(engine, spec)


if __name__ == "__main__":  # pragma: no cover - the report starts it (`Worker`, `reports.report.front`)
    sys.exit(main())
