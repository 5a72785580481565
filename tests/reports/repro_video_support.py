"""What the per-family video reproducer tests share (`test_repro_video_glm`, `test_repro_video_gemma4`): what a
written script must be (standalone, calling the engine's and the checkpoint's own steps), and running the scripts
of several groups of rows on a release in one child, each script's outcome checked against the parts its failure
must hold.

Why one place: every family's scripts are judged by the same rule (semantics §20's reproducers import nothing of
deferlab and restate no engine step), and one outcome reader serves a script of one case and a C19 script of one
case per kind alike (its kinds' failures joined in the script's order).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tests.reports.test_repro import run_cases
from tests.reports.test_repro_video import _written, imports


def assert_standalone(text: str, r: dict[str, Any], modules: Iterable[str], calls: Iterable[str]) -> None:
    """The script ``text`` of row ``r``: every placeholder filled, nothing of deferlab imported, ``modules``
    imported and ``calls`` made (the engine's own steps and the checkpoint's, called rather than restated), and the
    claim's test function defined."""
    assert "$" not in text, "a placeholder left unfilled"
    found = imports(text)
    assert not any("deferlab" in m for m in found), found
    assert set(modules) <= found, found
    for call in calls:
        assert call in text, call
    assert f"def test_{r['id'].lower()}_" in text


def outcomes(tmp: Path, groups: dict[str, list[dict]], engine: str, spec: str) -> dict[str, str]:
    """``<claim>-<group>`` -> "passed" or its failures' whole text (JUnit shortens a long message: the 600-frame
    lists), joined in the script's order where it runs several cases (C19: one a kind), from one child running
    every group's scripts on the release."""
    paths = _written(tmp, groups, engine, spec)
    cases, out = run_cases(paths, spec, tmp / f"{engine}-{spec}.xml", engine=engine)
    by: dict[str, list[str]] = {}
    for case in cases:
        (path,) = [p for p in paths if case.get("classname").endswith(p.stem)]
        failure = case.find("failure")
        key = f"{path.stem.split('-')[0]}-{path.stem.rsplit('-', 1)[1]}"
        by.setdefault(key, []).extend([] if failure is None else [failure.text or ""])
    assert len(by) == len(paths), out[-3000:]
    return {k: "\n".join(v) if v else "passed" for k, v in by.items()}


def expect(by: dict[str, str], messages: dict[str, tuple[str, ...]]) -> None:
    """The scripts that fail are the keys of ``messages``, each failure holding its parts in order; the rest pass."""
    assert {k for k, v in by.items() if v != "passed"} == set(messages), by
    for key, parts in messages.items():
        at = 0
        for part in parts:
            at = by[key].find(part, at)
            assert at >= 0, (key, part, by[key][:600])
