"""The record of every module that is not the real thing, and the description of what was loaded.

Why: a verdict on another project's code is only as real as what ran; each
stand-in, bare package, on-demand init, failed body or run-time patch is one
`StandIn`, kept in the order met, and `describe` is what a report prints.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class StandIn:
    """One module the engine wanted that is not the real thing here.

    kind: "missing" (not installed; imported unguarded by an engine file), "failed" (an engine module
    whose own body raised here: names defined before the failure are real, the rest stand-ins), "bare"
    (a package whose ``__init__.py`` was not run), "init" (a bare package whose real ``__init__.py`` ran
    on demand because a name from it was imported), "patched" (a real attribute the driver replaced at
    run time), "absent" (a module this version lacks that the driver answers with a stand-in),
    "companion" (a library the release pins, fetched and run at that version: `impl.loader.companions`),
    "declared" (an operator schema declared so a companion imports: torchvision's, without its kernels),
    "installed" (such a library imported as this environment has it, not at the release's pin: a load
    without companions).
    """

    module: str
    kind: str
    why: str

    def as_dict(self) -> dict[str, str]:
        return {"module": self.module, "kind": self.kind, "why": self.why}


class Records(list):
    """`StandIn` s in the order met; one per (module, kind)."""

    def add(self, module: str, kind: str, why: str) -> None:
        if not any(r.module == module and r.kind == kind for r in self):
            self.append(StandIn(module, kind, why))


def describe(source: Any, name: str | None = None) -> dict[str, Any]:
    """What ran: ``name`` (default the source's), version, origin (and, for a git checkout, its commit and
    whether its working tree was ``dirty``: edited since that commit, so the commit alone does not name the code),
    the ``patch`` applied to a copy of the tree (`patching`: the diff's file, path, sha256, files; None if none),
    the companion libraries it ran with (`impl.loader.companions`: name -> version, requirement, root, how
    chosen), and every stand-in import."""
    return {
        "name": name or source.name,
        "version": source.version,
        "kind": source.kind,
        "spec": source.spec,
        "root": str(source.root),
        "commit": source.git_rev,
        "dirty": getattr(source, "git_dirty", None),
        "patch": getattr(source, "patched_with", None) or None,  # `patching`: the diff applied to a copy (file, sha256)
        "load_seconds": round(float(source.load_seconds or 0.0), 2),
        "companions": {name: c.describe() for name, c in getattr(source, "companions", {}).items()},
        "stand_ins": [s.as_dict() for s in source.stand_ins],
    }
