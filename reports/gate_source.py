"""Stand-in kept only for ``reports/runner.py`` (not this room's file): the sweeps' rule and its name now live in
``reports.sweeps.compute`` (``decide_arrays``, ``DECISION_SOURCE``); delete this file once runner.py reads
``sweeps.DECISION_SOURCE`` itself.
"""

from __future__ import annotations

from deferlab.reports.sweeps import compute


def decision_source() -> str:
    """The report's ``decision_source``: `reports.sweeps.compute.DECISION_SOURCE`."""
    return compute.DECISION_SOURCE
