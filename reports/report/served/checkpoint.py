"""``--checkpoint DIR`` for the CLI: the reader lives in the description (`reference.system.snapshot`).

Why a re-export: the served checks (``properties.served``) read the same snapshot in the runner's children and
never import the CLI (issue 29, item 4); the CLI's callers keep this name.
"""

from __future__ import annotations

from deferlab.reference.system.snapshot import ACCEPTED, FILE, checkpoint_family, read_checkpoint

__all__ = ["ACCEPTED", "FILE", "checkpoint_family", "read_checkpoint"]
