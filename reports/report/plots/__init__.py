"""The report's figures (matplotlib, Agg, PNG): claims and sweeps (`figures`), the simulator (`sim`), the skew
table (`served`), and the steps that draw them (`steps`); every one is written by `save`."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from deferlab.reports.core.atomic import write_with_atomic  # noqa: E402


def save(fig: plt.Figure, path: Path) -> Path:
    """``fig`` as a PNG at ``path``, atomically (an interrupted run never leaves a truncated figure), then closed."""
    write_with_atomic(path, lambda tmp: fig.savefig(tmp, dpi=110, bbox_inches="tight"))
    plt.close(fig)
    return path
