"""The served paths of one report run: deferlab's model always, and the Kimi-K3 paths of each engine named that has
one (SGLang's with ``--sglang``, vLLM's with ``--vllm``: `KIMI_PATHS`, each engine's plugin hooks' ``kimi_paths``).

Why one holder: the sweep step (C13's exhaustive geometry) and the served step (the skew table) read the same
paths. The model's are this process's; an engine's are loaded in a child of their own (`reports.report.served.kimi`:
this process loads no engine, issue 29 item 4), started by the first step that needs them and asked by the others,
so each engine is loaded once a report. An engine that cannot be loaded is recorded with its one line (the step
that needed it fails, the report is still written).
"""

from __future__ import annotations

import importlib
import sys
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from deferlab.reference.system import engines
from deferlab.reference.system.config import PreprocessConfig
from deferlab.reference.system.engines import ENGINES
from deferlab.reference.system.policies import DEFAULT_POLICY
from deferlab.reports.core.executor import each
from deferlab.reports.report.served.kimi import (  # noqa: F401 - kimi_paths, describe_systems: re-exported
    ChildFailed,
    RemotePath,
    Worker,
    config_request,
    describe_systems,
    kimi_paths,
)


def model_paths(policy: str = DEFAULT_POLICY.name) -> list[Any]:
    """deferlab's model under ``policy``: its eager path, and its deferred one where the policy defers."""
    from deferlab.impl.served import model_paths as seam_paths

    return [p for p in seam_paths(policy) if p.path == "eager" or p.impl.defers(policy)]


def vllm_path(spec: str, media_proc_cfg: dict[str, Any] | None = None) -> Any:
    """vLLM ``spec``'s one path (the checkpoint oracle handed in for the releases serving its remote code)."""
    return kimi_paths("vllm", spec, media_proc_cfg)[0]


def _has_kimi_paths(facts: engines.EngineFacts) -> bool:
    """Whether the engine's hooks give Kimi-K3 paths (a hooks module that cannot be imported gives none: its
    engine's own steps say why)."""
    try:
        return bool(facts.hooks) and hasattr(importlib.import_module(facts.hooks), "kimi_paths")
    except Exception:  # noqa: BLE001 - a broken plugin is refused by its own steps, not by this lookup
        return False


KIMI_PATHS: dict[str, Any] = {  # engine -> its Kimi-K3 paths from (spec, media_proc_cfg), loaded in this process
    name: partial(kimi_paths, name) for name, facts in ENGINES.items() if _has_kimi_paths(facts)
}  # the engines without one (LMDeploy: semantics §19.1) have no Kimi-K3 column in the skew table or the sweep


def named_specs(holder: Any, engines: dict[str, str]) -> dict[str, str]:
    """engine -> spec, in the registry's order: ``engines``, and an attribute of ``holder`` named after an engine
    (``sglang=``, ``vllm=``: how the report's options and paths were built before every engine had one)."""
    named = {n: getattr(holder, n) for n in ENGINES if isinstance(getattr(holder, n, None), str)} | dict(engines)
    return {n: named[n] for n in ENGINES if n in named}


def _close(workers: dict[str, Worker]) -> None:
    for worker in list(workers.values()):
        worker.close()
    workers.clear()


@dataclass
class RunPaths:
    """The run's paths, loaded on first use; ``errors``: engine -> why it could not be loaded (one line).

    ``engines``: every engine the report names (``--NAME SPEC``, name -> spec); ``sglang`` / ``vllm`` name one
    the same way (kept for callers that build the paths directly). An engine's paths are `RemotePath`s, their
    work done by its child (`ask`); the model's (and any given as ``_paths``) run here."""

    sglang: str | None = None
    vllm: str | None = None
    media_proc_cfg: dict[str, Any] | None = None  # --checkpoint's raw media_proc_cfg, handed to vLLM as it is
    policy: str = DEFAULT_POLICY.name
    errors: dict[str, str] = field(default_factory=dict)
    _paths: list[Any] | None = None
    engines: dict[str, str] = field(default_factory=dict)
    _workers: dict[str, Worker] = field(default_factory=dict, repr=False)
    _systems: dict[str, Any] = field(default_factory=dict, repr=False)
    _pending: Callable[[Callable[[str], None]], list[dict[str, Any]]] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        weakref.finalize(self, _close, self._workers)  # the children end with the holder (or at the run's end)

    def specs(self) -> dict[str, str]:
        """engine -> spec for every engine named, in the registry's order."""
        return named_specs(self, self.engines)

    def get(self) -> list[Any]:
        """Every path that could be loaded (model first, then each engine's Kimi-K3 paths in the registry's order,
        each engine's loaded in its child: they load side by side, their answers read in order through the one
        executor)."""
        if self._paths is None:
            self._paths = list(model_paths(self.policy))
            torch = sys.modules.get("torch")  # the children's torch pool as this process's (`reports.report.run`)
            threads = torch.get_num_threads() if torch is not None else None
            workers = [Worker(n, s) for n, s in self.specs().items() if n in KIMI_PATHS]
            for worker in workers:
                worker.start(self.media_proc_cfg, threads)
            each(workers, self._loaded, self._started)
        return list(self._paths)

    def local(self) -> list[Any]:
        """The paths run in this process (the model's): every path but the engines'."""
        return [p for p in self.get() if not isinstance(p, RemotePath)]

    def ask(self, request: dict[str, Any], say: Callable[[str], None]) -> list[dict[str, Any]]:
        """Every engine child's answer to ``request``, in the registry's order (`request`, then its answers)."""
        return self.request(request)(say)

    def request(self, request: dict[str, Any]) -> Callable[[Callable[[str], None]], list[dict[str, Any]]]:
        """Hand ``request`` to every engine child now, so they work while this process does its own part; the
        function returned waits for their answers, in the registry's order through the one executor, one engine
        at a time (their progress lines relayed to its ``say`` in that order), and raises `ChildFailed` with the
        first failure's one line. Answers not waited for are read (and dropped) before the next request."""
        self.get()
        self._drain()
        workers = list(self._workers.items())
        sent = []
        for name, worker in workers:
            try:
                worker.send(request)
                sent.append((name, worker, None))
            except ChildFailed as e:
                sent.append((name, worker, f"{name} {worker.spec!r}: {e}"))
        answered: list[Any] = []

        def one(say: Callable[[str], None], item: tuple[str, Worker, str | None]) -> dict[str, Any] | str:
            name, worker, failed = item
            try:
                return failed or worker.receive(say)
            except ChildFailed as e:
                return f"{name} {worker.spec!r}: {e}"

        def answers(say: Callable[[str], None]) -> list[dict[str, Any]]:
            if not answered:
                answered.append([])
                each(sent, partial(one, say), lambda _item, got: answered[0].append(got))
                for got in answered[0]:  # the description as of the last work (`systems`)
                    self._systems.update(got["systems"] if isinstance(got, dict) else {})
            failed = [got for got in answered[0] if isinstance(got, str)]
            if failed:
                raise ChildFailed(failed[0])
            return list(answered[0])

        self._pending = answers
        return answers

    def _drain(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            try:
                pending(lambda _m: None)
            except ChildFailed:
                pass

    def geometry(self, max_side: int, say: Callable[[str], None]) -> Callable[[str, PreprocessConfig], Any]:
        """The sweep's ``remote`` (`reports.report.sweeps.geometry.geometry_records`): one geometry handed to
        every engine child; the function returned waits for their parts."""

        def send(_name: str, cfg: PreprocessConfig) -> Callable[[], list[dict[str, Any]]]:
            answers = self.request({"do": "geometry", "max_side": max_side, **config_request(cfg)})
            return lambda: answers(say)

        return send

    def close(self) -> None:
        """End the engines' children now (else they end with this holder, or with the report's process)."""
        _close(self._workers)

    def systems(self) -> dict[str, Any]:
        """engine -> what its loaded paths describe (``describe()``), for the engines loaded so far."""
        local = describe_systems([p for p in self._paths or [] if not isinstance(p, RemotePath)])
        return local | {k: v for k, v in self._systems.items() if k not in local}

    def _loaded(self, worker: Worker) -> dict[str, Any] | str:
        try:
            return worker.loaded()
        except ChildFailed as e:  # an engine that cannot load fails its steps, not the report
            return f"{worker.engine} {worker.spec!r}: {e}"

    def _started(self, worker: Worker, answer: dict[str, Any] | str) -> None:
        if isinstance(answer, str):
            self.errors[worker.engine] = answer
            return
        self._workers[worker.engine] = worker
        self._paths = (self._paths or []) + [RemotePath(**p) for p in answer["paths"]]
        self._systems.update(answer["systems"])
