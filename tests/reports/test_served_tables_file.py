"""An engine's family tables come back from its child as a results file (fields and arrays, no pickle), through a
task of the local executor (issue 29, item 4)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deferlab.reports.core.runner import RunRecord
from deferlab.reports.report.served import family, images, report, skew, tables_file
from tests.reports.test_report_family_skew import QWEN, FakeFamilyPath


def _found() -> dict[str, dict[str, Any]]:
    samples = {c: images.generated(c, 1)[:1] for c in ("RGB", images.ARRAY_CLASS)}
    paths = [FakeFamilyPath("exact"), FakeFamilyPath("shift3", 3)]
    cols = family.family_table(paths, "qwen3-vl", QWEN, samples, lambda _m: None)
    cols[1].table_error = None
    return {
        "qwen3-vl": {"columns": cols, "classes": skew.table_dict([], samples)["classes"]},
        "gemma3": {"na": "n/a: no SGLang path for Gemma 3"},
    }


def _same(a: skew.Column, b: skew.Column) -> None:
    assert a.to_dict() == b.to_dict() and a.family == b.family
    for cls, cell in a.cells.items():
        other = b.cells[cls]
        assert {f.name: getattr(cell, f.name) for f in dataclasses.fields(cell) if f.name != "worst"} == {
            f.name: getattr(other, f.name) for f in dataclasses.fields(other) if f.name != "worst"
        }
        if cell.worst is None:
            assert other.worst is None
            continue
        w, v = cell.worst, other.worst
        assert v is not None and (w.origin, w.max_levels, w.crop, w.full) == (v.origin, v.max_levels, v.crop, v.full)
        for name in tables_file.ARRAYS:
            x, y = getattr(w, name), getattr(v, name)
            assert x.dtype == y.dtype and np.array_equal(x, y), name


def test_the_results_file_gives_back_every_column_field_for_field(tmp_path: Path) -> None:
    found = _found()
    assert found["qwen3-vl"]["columns"][1].cells["RGB"].worst is not None  # a worst image to carry
    out = tmp_path / "served-sglang.json"
    tables_file.write(found, out)
    with np.load(tables_file.arrays_path(out), allow_pickle=False) as npz:  # plain arrays only
        assert len(npz.files) == len(tables_file.ARRAYS) * sum(
            c.worst is not None for col in found["qwen3-vl"]["columns"] for c in col.cells.values()
        )
    back = tables_file.read(out)
    assert back["gemma3"] == found["gemma3"] and back["qwen3-vl"]["classes"] == found["qwen3-vl"]["classes"]
    for a, b in zip(found["qwen3-vl"]["columns"], back["qwen3-vl"]["columns"], strict=True):
        _same(a, b)
    doc = out.read_text().replace('"schema": 1', '"schema": 0')
    out.write_text(doc)
    with pytest.raises(ValueError, match="schema 0"):
        tables_file.read(out)


def test_the_parent_reads_what_the_task_wrote_and_removes_it(tmp_path: Path, monkeypatch: Any) -> None:
    """The step's child is a `TablesTask` of the local executor: the tables it wrote are read back and its files
    removed (the report keeps its log); a child that failed is one line naming its exit and last log line."""
    found, asked = _found(), []

    def child(self: report.TablesTask, work: Path | None, launcher: Any) -> RunRecord:
        asked.append((self.request.system.engine, self.request.system.spec, self.names, work))
        out, log = self.files(Path(work or tmp_path))
        log.write_text("loading\n")
        tables_file.write(found, out)
        return RunRecord(self.request.system, self.request.profile, rc=0, wrote=True)

    monkeypatch.setattr(report.TablesTask, "perform", child)
    got, error = report._run_child("sglang", "0.5.23", ["qwen3-vl", "gemma3"], tmp_path, lambda _m: None)
    assert error is None and asked == [("sglang", "0.5.23", ("qwen3-vl", "gemma3"), tmp_path)]
    _same(found["qwen3-vl"]["columns"][1], got["qwen3-vl"]["columns"][1])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["served-sglang.log"]

    def failed(self: report.TablesTask, work: Path | None, launcher: Any) -> RunRecord:
        self.files(Path(work or tmp_path))[1].write_text("Traceback\nImportError: no module named sglang\n")
        return RunRecord(self.request.system, self.request.profile, rc=1)

    monkeypatch.setattr(report.TablesTask, "perform", failed)
    got, error = report._run_child("vllm", "0.34.0", ["internvl"], tmp_path, lambda _m: None)
    assert got == {} and error == "vllm '0.34.0' family tables: the child exited 1: ImportError: no module named sglang"
