"""The served paths of one report run: deferlab's model always, and the Kimi-K3 paths of each engine named that has
one (SGLang's with ``--sglang``, vLLM's with ``--vllm``: `KIMI_PATHS`, each engine's plugin hooks' ``kimi_paths``).

Why one holder: the sweep step (C13's exhaustive geometry) and the served step
(the skew table) read the same paths, and an engine is loaded once per process
(``impl.loader``), so the first step that needs the paths loads them and the
other reuses them. An engine that cannot be loaded is recorded with its one
line (the step that needed it fails, the report is still written).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from deferlab.reference.system import engines
from deferlab.reference.system.engines import ENGINES, engine_of_label
from deferlab.reference.system.policies import DEFAULT_POLICY
from deferlab.reports.report.served.skew import one_line


def model_paths(policy: str = DEFAULT_POLICY.name) -> list[Any]:
    """deferlab's model under ``policy``: its eager path, and its deferred one where the policy defers."""
    from deferlab.impl.served import model_paths as seam_paths

    return [p for p in seam_paths(policy) if p.path == "eager" or p.impl.defers(policy)]


def _hooks(engine: str) -> Any:
    return importlib.import_module(engines.engine(engine).hooks)


def kimi_paths(engine: str, spec: str, media_proc_cfg: dict[str, Any] | None = None) -> list[Any]:
    """``engine`` ``spec``'s Kimi-K3 paths, loaded in this process through its plugin's hooks (``kimi_paths``:
    this module names no engine's package); the checkpoint oracle is handed in for the releases serving its
    remote code (impl never imports the oracle)."""
    from deferlab.reference.oracle import checkpoint

    return list(_hooks(engine).kimi_paths(spec, media_proc_cfg, checkpoint))


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


@dataclass
class RunPaths:
    """The run's paths, loaded on first use; ``errors``: engine -> why it could not be loaded (one line).

    ``engines``: every engine the report names (``--NAME SPEC``, name -> spec); ``sglang`` / ``vllm`` name one
    the same way (kept for callers that build the paths directly)."""

    sglang: str | None = None
    vllm: str | None = None
    media_proc_cfg: dict[str, Any] | None = None  # --checkpoint's raw media_proc_cfg, handed to vLLM as it is
    policy: str = DEFAULT_POLICY.name
    errors: dict[str, str] = field(default_factory=dict)
    _paths: list[Any] | None = None
    engines: dict[str, str] = field(default_factory=dict)

    def specs(self) -> dict[str, str]:
        """engine -> spec for every engine named, in the registry's order."""
        return named_specs(self, self.engines)

    def get(self) -> list[Any]:
        """Every path that could be loaded (model first, then each engine's Kimi-K3 paths in the registry's order)."""
        if self._paths is None:
            self._paths = list(model_paths(self.policy))
            for name, spec in self.specs().items():
                make = KIMI_PATHS.get(name)
                if make is not None:
                    self._paths += self._load(name, lambda s, make=make: make(s, self.media_proc_cfg), spec)
        return list(self._paths)

    def systems(self) -> dict[str, Any]:
        """engine -> what its loaded paths describe (``describe()``), for the engines loaded so far."""
        out: dict[str, Any] = {}
        for p in self._paths or []:
            owner = p if hasattr(p, "describe") else getattr(p, "impl", None)
            facts = engine_of_label(str(p.label))
            if p.real_code and hasattr(owner, "describe"):
                out.setdefault(facts.name if facts is not None else "sglang", owner.describe())
        return out

    def _load(self, engine: str, make: Any, spec: str) -> list[Any]:
        try:
            return make(spec)
        except Exception as e:  # noqa: BLE001 - an engine that cannot load fails its steps, not the report
            self.errors[engine] = f"{engine} {spec!r}: {one_line(e)}"
            return []
