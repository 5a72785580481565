"""The content-keyed bytecode cache (`impl.loader.bytecode`): never stale, one entry for every copy of a file.

A cached code object must behave as compiling the bytes would, name the file being loaded (tracebacks and
the importer's "is this frame the engine's?" test read ``co_filename``), change with any byte of the source
(a mutant gets its own), survive a corrupt entry, and stay out of the way when turned off.
"""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from deferlab.impl.loader import bytecode

SOURCE = b"def f(x):\n    def g():\n        return x + 1\n    return g()\n"


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEFERLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(bytecode.ENV, raising=False)


def _code(path: str, data: bytes, calls: list[str]) -> types.CodeType:
    def compile_source() -> types.CodeType:
        calls.append(path)
        return compile(data, path, "exec", dont_inherit=True)

    return bytecode.code_for(path, data, compile_source)


def _f(code: types.CodeType) -> types.FunctionType:
    ns: dict = {}
    exec(code, ns)  # noqa: S102 - the test's own source
    return ns["f"]


def _entries() -> list[Path]:
    return [p for p in bytecode.folder().rglob("*.pyc")]


def test_a_second_load_is_read_back_and_names_the_file_it_loads() -> None:
    calls: list[str] = []
    first = _code("/a/m.py", SOURCE, calls)
    again = _code("/b/copy/m.py", SOURCE, calls)  # the same bytes in another tree (a mutation slot)
    assert calls == ["/a/m.py"] and len(_entries()) == 1
    assert _f(again)(41) == 42 == _f(first)(41)
    inner = next(c for c in again.co_consts[0].co_consts if isinstance(c, types.CodeType))
    assert again.co_filename == again.co_consts[0].co_filename == inner.co_filename == "/b/copy/m.py"


def test_any_changed_byte_is_its_own_entry() -> None:
    calls: list[str] = []
    _code("/a/m.py", SOURCE, calls)
    mutant = _code("/a/m.py", SOURCE.replace(b"x + 1", b"x - 1"), calls)
    assert len(calls) == 2 and len(_entries()) == 2
    assert _f(mutant)(41) == 40


def test_a_corrupt_entry_is_compiled_again() -> None:
    calls: list[str] = []
    _code("/a/m.py", SOURCE, calls)
    (entry,) = _entries()
    entry.write_bytes(b"not marshal data")
    assert _f(_code("/a/m.py", SOURCE, calls))(1) == 2 and len(calls) == 2


def test_off_compiles_every_time_and_writes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(bytecode.ENV, "off")
    calls: list[str] = []
    _code("/a/m.py", SOURCE, calls)
    _code("/a/m.py", SOURCE, calls)
    assert len(calls) == 2 and not bytecode.folder().exists()


def test_the_import_line_table_is_kept_by_content() -> None:
    scans: list[int] = []

    def scan() -> dict[int, bool]:
        scans.append(1)
        return {1: False, 3: True}

    assert bytecode.lines_for(SOURCE, scan) == {1: False, 3: True}
    assert bytecode.lines_for(SOURCE, scan) == {1: False, 3: True} and len(scans) == 1
    assert bytecode.lines_for(SOURCE + b"\n", scan) == {1: False, 3: True} and len(scans) == 2


def test_a_read_touches_an_entry_and_prune_removes_only_those_not_read_for_days() -> None:
    import os
    import time

    calls: list[str] = []
    _code("/a/m.py", SOURCE, calls)
    _code("/a/m.py", SOURCE + b"\n", calls)
    bytecode.lines_for(SOURCE, lambda: {1: False})
    old = time.time() - 10 * 86400
    for entry in bytecode.folder().rglob("*"):
        if entry.is_file():
            os.utime(entry, (old, old))
    _code("/b/m.py", SOURCE, calls)  # read back: touched
    assert len(calls) == 2 and bytecode.usage()[0] == 3
    assert bytecode.prune(9)[0] == 2  # the unread .pyc and the unread line table
    assert [p.name.endswith(".pyc") for p, _ in bytecode.entries()] == [True]
    _code("/a/m.py", SOURCE, calls)
    assert len(calls) == 2  # the read one is still there
    removed, freed = bytecode.prune()
    assert removed == 1 and freed > 0 and bytecode.usage() == (0, 0)
    assert not any(bytecode.root().iterdir())  # empty folders go too
