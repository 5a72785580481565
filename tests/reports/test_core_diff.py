"""`reports.core.diff` and `reports.core.baseline`: the one comparison of two runs and the one baseline type."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deferlab.reports.core import baseline as bl
from deferlab.reports.core.diff import Cell, Summary, diff, kind_of, regressions, signatures_gated

REPORTS = Path(bl.__file__).resolve().parents[1]
F = frozenset


@pytest.mark.parametrize(
    ("before", "after", "kind"),
    [
        (Cell("holds"), Cell("fails", F({"a"})), "newly failing"),
        (Cell("holds-with-caveat"), Cell("fails"), "newly failing"),
        (Cell("n/a"), Cell("fails"), "newly failing"),  # a feature that arrives broken
        (Cell("fails", F({"a"})), Cell("holds"), "newly holding"),
        (Cell("fails", F({"a"})), Cell("fails", F({"a", "b"})), "failing differently"),
        (Cell("fails", F({"a", "b"})), Cell("fails", F({"a"})), "unchanged"),  # a way that went away alone
        (Cell("fails", F({"a"})), Cell("fails", F({"a"})), "unchanged"),
        (Cell("holds"), Cell("not-run"), "changed"),
        (Cell("not-run"), Cell("fails"), "changed"),
        (Cell("holds"), Cell("holds"), "unchanged"),
    ],
)
def test_each_change_has_one_kind(before: Cell, after: Cell, kind: str) -> None:
    assert kind_of(before, after) == kind


def test_a_cell_one_run_lacks_is_not_run_there_and_cells_come_in_claim_order() -> None:
    before = {("C10", "RELEASED"): Cell("fails", F({"x"})), ("C2", "RELEASED"): Cell("holds")}
    after = {("C2", "RELEASED"): Cell("holds"), ("C9", "RELEASED"): Cell("fails", F({"y"}))}
    changes = diff(before, after)
    assert [(c.subject, c.before, c.after, c.kind) for c in changes] == [
        ("C2", "holds", "holds", "unchanged"),
        ("C9", "not-run", "fails", "changed"),
        ("C10", "fails", "not-run", "changed"),
    ]
    assert changes[1].new == ("y",) and changes[2].gone == ()


def test_one_gate_rule_for_baselines_and_reviews() -> None:
    """Against a baseline every change of verdict regresses; in a review only what got worse; a new signature
    of a failing claim only when gated."""
    before = {("C1", "X"): Cell("holds"), ("C2", "X"): Cell("fails", F({"a"})), ("C3", "X"): Cell("fails", F({"a"}))}
    after = {
        ("C1", "X"): Cell("fails", F({"a"})),
        ("C2", "X"): Cell("holds"),
        ("C3", "X"): Cell("fails", F({"a", "b"})),
    }
    changes = diff(before, after)
    names = lambda cs: [c.name for c in cs]  # noqa: E731
    assert names(regressions(changes, scope="baseline")) == ["C1/X", "C2/X"]
    assert names(regressions(changes, scope="review")) == ["C1/X"]
    assert names(regressions(changes, scope="review", gated=True)) == ["C1/X", "C3/X"]
    assert Summary.of(changes).line() == (
        "1 newly failing (C1/X); 1 failing differently (C3/X); 1 newly holding (C2/X); 0 changed; 0 unchanged"
    )
    with pytest.raises(ValueError, match="scope must be one of"):
        regressions(changes, scope="other")


def test_signatures_gate_only_derandomized_and_strict() -> None:
    assert signatures_gated("ci", "ci", True)
    assert not signatures_gated("ci", "ci", False)  # a user who did not ask for strictness is shown, not failed
    assert not signatures_gated("dev", "dev", True)  # random searches
    assert not signatures_gated("ci", "dev", True) and not signatures_gated("ci", None, True)


# --- the baseline type -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "kind"),
    [("baseline.json", "report"), ("versions_baseline.json", "versions"), ("mutate_baseline.json", "mutate")],
)
def test_the_committed_schema_1_baselines_are_read(name: str, kind: str) -> None:
    path = REPORTS / name
    raw = json.loads(path.read_text())
    b = bl.load(path, kind)
    assert b.kind == kind and b.cells
    if raw.get("schema_version") != 1:
        return  # rewritten in schema 2 since: read as it is
    if kind == "report":
        assert b.cells["RELEASED"]["C1"] == raw["claims"]["C1/RELEASED"]
        key = next(iter(raw["signatures"]))
        cid, _, policy = key.partition("/")
        assert b.signatures[policy][cid] == raw["signatures"][key] and b.meta["sweeps"] == raw["sweeps"]
    elif kind == "versions":
        assert b.cells == raw["verdicts"] and b.profile == raw["profile"]
    else:
        assert b.cells == {raw["spec"]: raw["outcomes"]} and b.meta["seed"] == raw["seed"]


def test_a_baseline_round_trips_in_schema_2_and_a_kind_mismatch_is_refused(tmp_path: Path) -> None:
    cells = {("C12", "0.5.23"): Cell("fails", F({"s1", "s0"})), ("C1", "0.5.23"): Cell("holds")}
    b = bl.Baseline.of("versions", cells, profile="ci", meta={"note": 1})
    bl.save(tmp_path / "b.json", b)
    doc = json.loads((tmp_path / "b.json").read_text())
    assert doc["schema_version"] == 2 and doc["signatures"] == {"0.5.23": {"C12": ["s0", "s1"]}}
    assert list(doc["cells"]["0.5.23"]) == ["C1", "C12"]  # claim order
    again = bl.load(tmp_path / "b.json", "versions")
    assert again.as_cells() == cells and again.meta == {"note": 1}
    with pytest.raises(ValueError, match="is a versions baseline; a report baseline is needed"):
        bl.load(tmp_path / "b.json", "report")


def test_replacing_keeps_the_other_places() -> None:
    old = bl.Baseline(
        "versions", "ci", {"0.5.22": {"C9": "holds"}, "0.5.23": {"C9": "fails"}}, {"0.5.23": {"C9": ["x"]}}
    )
    new = bl.Baseline("versions", "ci", {"0.5.23": {"C9": "holds"}})
    merged = old.replacing(new)
    assert merged.cells == {"0.5.22": {"C9": "holds"}, "0.5.23": {"C9": "holds"}} and merged.signatures == {}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, "does not exist"),
        ("{", "cannot read baseline"),
        ("[]", "is not a JSON object"),
        ('{"schema_version": 7}', "is not a deferlab baseline"),
        ('{"schema_version": 1, "x": 1}', "no cells, claims, verdicts or outcomes"),
        ('{"schema_version": 2, "kind": "report", "cells": []}', "'cells' must be an object"),
    ],
)
def test_a_bad_baseline_is_refused_naming_the_file(tmp_path: Path, text: str | None, message: str) -> None:
    path = tmp_path / "b.json"
    if text is not None:
        path.write_text(text)
    with pytest.raises(ValueError, match=message):
        bl.load(path)
