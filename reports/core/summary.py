"""GitHub Actions' job summary: append deferlab's Markdown to ``$GITHUB_STEP_SUMMARY`` when CI sets it.

Why: the job page then shows the verdicts and what changed, without anyone
opening an artifact. Outside GitHub Actions (the variable unset or empty) it
does nothing. The file is GitHub's, shared by every step of the job, so it is
appended to, never replaced.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV = "GITHUB_STEP_SUMMARY"


def append_step_summary(markdown: str, *, env: dict[str, str] | None = None) -> Path | None:
    """Append ``markdown`` (one trailing newline ensured) to the job summary file; its path, or None when unset."""
    target = (os.environ if env is None else env).get(ENV, "").strip()
    if not target:
        return None
    path = Path(target)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(markdown if markdown.endswith("\n") else markdown + "\n")
    return path
