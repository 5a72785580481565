"""The report's figures (matplotlib, Agg, PNG): claims and sweeps (`figures`), the simulator (`sim`), the skew
table (`served`), and the steps that draw them (`steps`); every one is written by `save`."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from deferlab.reports.core.atomic import save_figure as save  # noqa: E402

__all__ = ["save"]
