"""The served paths of one report run: deferlab's model always, SGLang's with ``--sglang``, vLLM's with ``--vllm``.

Why one holder: the sweep step (C13's exhaustive geometry) and the served step
(the skew table) read the same paths, and an engine is loaded once per process
(``impl.loader``), so the first step that needs the paths loads them and the
other reuses them. An engine that cannot be loaded is recorded with its one
line (the step that needed it fails, the report is still written).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from deferlab.reference.system.policies import DEFAULT_POLICY
from deferlab.reports.report.served.skew import one_line


def model_paths(policy: str = DEFAULT_POLICY.name) -> list[Any]:
    """deferlab's model under ``policy``: its eager path, and its deferred one where the policy defers."""
    from deferlab.impl.served import model_paths as seam_paths

    return [p for p in seam_paths(policy) if p.path == "eager" or p.impl.defers(policy)]


def sglang_paths(spec: str) -> list[Any]:
    """SGLang ``spec``'s eager (and deferred) paths, loaded in this process."""
    from deferlab.impl.sglang.driver import SGLangImpl
    from deferlab.impl.sglang.served import paths

    return paths(SGLangImpl(spec))


def vllm_path(spec: str, media_proc_cfg: dict[str, Any] | None = None) -> Any:
    """vLLM ``spec``'s one path (the checkpoint oracle handed in for the releases serving its remote code)."""
    from deferlab.impl.vllm.driver import VLLMPath
    from deferlab.reference.oracle import checkpoint

    return VLLMPath(spec, media_proc_cfg=media_proc_cfg, checkpoint=checkpoint)


@dataclass
class RunPaths:
    """The run's paths, loaded on first use; ``errors``: engine -> why it could not be loaded (one line)."""

    sglang: str | None = None
    vllm: str | None = None
    media_proc_cfg: dict[str, Any] | None = None  # --checkpoint's raw media_proc_cfg, handed to vLLM as it is
    policy: str = DEFAULT_POLICY.name
    errors: dict[str, str] = field(default_factory=dict)
    _paths: list[Any] | None = None

    def get(self) -> list[Any]:
        """Every path that could be loaded (model first, then SGLang's, then vLLM's)."""
        if self._paths is None:
            self._paths = list(model_paths(self.policy))
            if self.sglang is not None:
                self._paths += self._load("sglang", sglang_paths, self.sglang)
            if self.vllm is not None:
                self._paths += self._load("vllm", lambda s: [vllm_path(s, self.media_proc_cfg)], self.vllm)
        return list(self._paths)

    def systems(self) -> dict[str, Any]:
        """engine -> what its loaded paths describe (``describe()``), for the engines loaded so far."""
        out: dict[str, Any] = {}
        for p in self._paths or []:
            owner = p if hasattr(p, "describe") else getattr(p, "impl", None)
            if p.real_code and hasattr(owner, "describe"):
                out.setdefault("vllm" if p.label == "VLLM" else "sglang", owner.describe())
        return out

    def _load(self, engine: str, make: Any, spec: str) -> list[Any]:
        try:
            return make(spec)
        except Exception as e:  # noqa: BLE001 - an engine that cannot load fails its steps, not the report
            self.errors[engine] = f"{engine} {spec!r}: {one_line(e)}"
            return []
