"""Every public entry point's bad inputs, in one table: the exception and the message each must give.

After Hypothesis's own ``tests/cover/test_direct_strategies.py``: instead of
a ``test_bad_inputs`` in every file, one list of rows, each naming the entry
point, the bad input, the exception class and a regex the message must
match. The regex carries what makes an error clear: the input's name, what
is wrong, and what is accepted. Every exception must belong to deferlab's
one family (`reference.system.errors.DeferlabInputError`, a `ValueError` or
`TypeError` subclass), so ``except ValueError`` keeps working and a caller
can tell "deferlab refused my input" from "the system under test failed".

Sections: the Python API (reference, impl, sim), config JSON files,
scenario TOML files, and the ``deferlab`` command line (exit status 2, the
message on stderr). A new public entry point adds its rows here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from deferlab.reference.system.errors import DeferlabInputError
from tests.front_door.api import API_ROWS, Bad
from tests.front_door.arrays import ORACLE_ROWS
from tests.front_door.cache import CACHE_ROWS, OFFLINE_ROWS
from tests.front_door.ci_output import CI_OUTPUT_ROWS
from tests.front_door.compare import COMPARE_CLI_ROWS
from tests.front_door.doors import DOOR_ROWS, LOCK_ROWS, OFFLINE_ARGV, OFFLINE_MATCH
from tests.front_door.files import CLI_ROWS as BASE_CLI_ROWS
from tests.front_door.files import FILE_ROWS, BadCli
from tests.front_door.mutate import MUTATE_ROWS
from tests.front_door.served import SERVED_ROWS

PYTHON_ROWS = API_ROWS + ORACLE_ROWS + FILE_ROWS + SERVED_ROWS + OFFLINE_ROWS
CLI_ROWS = BASE_CLI_ROWS + COMPARE_CLI_ROWS + MUTATE_ROWS + CI_OUTPUT_ROWS + CACHE_ROWS + DOOR_ROWS + LOCK_ROWS


@pytest.mark.parametrize("row", PYTHON_ROWS, ids=[r.id for r in PYTHON_ROWS])
def test_python_entry_point_refuses_clearly(row: Bad, tmp_path: Path) -> None:
    """The row's call raises its exception, in deferlab's family, with a message naming input and what is accepted."""
    with pytest.raises(row.error, match=row.match) as info:
        row.call(tmp_path)
    assert isinstance(info.value, DeferlabInputError), f"{type(info.value).__mro__} is outside the error family"
    assert isinstance(info.value, ValueError | TypeError), "the family keeps ValueError / TypeError handlers working"
    assert "\n" not in str(info.value), f"a front-door message is one line: {info.value}"


def test_row_ids_are_unique() -> None:
    """Each row names one case (a duplicate id would hide a row in the report)."""
    ids = [r.id for r in PYTHON_ROWS + CLI_ROWS]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)


# deferlab mutate checks its extra (cosmic-ray's operators) first: its rows need it, and skip naming it without
MUTATE_IDS = {r.id for r in MUTATE_ROWS}
CLI_PARAMS = [
    pytest.param(r, id=r.id, marks=[pytest.mark.extra("mutate")] if r.id in MUTATE_IDS else []) for r in CLI_ROWS
]


@pytest.mark.parametrize("row", CLI_PARAMS)
def test_cli_refuses_clearly(row: BadCli, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """The argument exits 2 before any work, and stderr names the option, the value and what is accepted."""
    from deferlab.reports.cli import main

    assert main(row.argv(tmp_path)) == 2
    err = capsys.readouterr().err
    line = [x for x in err.splitlines() if x.startswith("deferlab: error:")]
    assert line, f"no 'deferlab: error:' line on stderr: {err!r}"
    assert any(re.search(row.match, x) for x in line), (row.match, line)
    assert not (tmp_path / "latest").exists()


@pytest.mark.parametrize("argv", OFFLINE_ARGV, ids=[" ".join(a) for a in OFFLINE_ARGV])
def test_offline_switch_is_refused_by_every_command(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """``DEFERLAB_OFFLINE=maybe`` is refused at every command's door, one line, exit 2: also by a command that
    fetches nothing, or fetches only in a child process later (where it would have ended as a run error)."""
    from deferlab.reports.cli import main

    monkeypatch.setenv("DEFERLAB_OFFLINE", "maybe")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len([x for x in err.splitlines() if x.startswith("deferlab: error:")]) == 1, err
    assert any(re.search(OFFLINE_MATCH, x) for x in err.splitlines()), err
