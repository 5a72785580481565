"""The front-door rows of ``deferlab mutate``: each bad argument exits 2 in one line before anything runs.

The rows point ``--sglang`` at the fake engine tree of the mutate tests
(``properties/reports/mutate_fake/python``: shaped like an SGLang checkout,
so it resolves without importing anything) where a row needs a tree.
"""

from __future__ import annotations

from pathlib import Path

from deferlab.properties.front_door.files import BadCli

FAKE = Path(__file__).resolve().parents[1] / "reports" / "mutate_fake" / "python"


def _mutate(tmp: Path, *argv: str) -> list[str]:
    return ["mutate", "--sglang", str(FAKE), "--out", str(tmp / "out"), *argv]


def _baseline(tmp: Path) -> str:
    (tmp / "mb.json").write_text("{}")
    return str(tmp / "mb.json")


MUTATE_ROWS = [
    BadCli(
        "mutate unknown target file",
        lambda t: _mutate(t, "--target", "sglang/srt/nope.py"),
        r"--target 'sglang/srt/nope.py': no such Python file in the sglang tree",
    ),
    BadCli(
        "mutate unknown target function",
        lambda t: _mutate(t, "--target", "sglang/srt/gate.py:nope"),
        r"--target 'sglang/srt/gate.py:nope': sglang/srt/gate.py defines no function 'nope' \(it defines ",
    ),
    BadCli(
        "mutate no mutants",
        lambda t: _mutate(t, "--target", "sglang/version.py"),
        r"--target sglang/version.py: cosmic-ray's operators find no mutant in it; nothing to run",
    ),
    BadCli("mutate sample", lambda t: _mutate(t, "--sample", "0"), r"--sample must be an int >= 1, got 0"),
    BadCli("mutate jobs", lambda t: _mutate(t, "--jobs", "0"), r"--jobs must be an int >= 1, got 0"),
    BadCli("mutate timeout", lambda t: _mutate(t, "--timeout", "0"), r"--timeout must be a number of seconds > 0"),
    BadCli("mutate profile", lambda t: _mutate(t, "--profile", "fast"), r"--profile must be one of 'dev', 'ci'"),
    BadCli("mutate claims", lambda t: _mutate(t, "--claims", "C3,C99"), r"--claims: unknown claim\(s\) C99; claims"),
    BadCli("mutate resume nothing", lambda t: _mutate(t, "--resume"), r"--resume: .* holds no campaign"),
    BadCli(
        "mutate baseline",
        lambda t: _mutate(t, "--baseline", _baseline(t)),
        r"--baseline: .*mb\.json' is not a mutate baseline",
    ),
    BadCli(
        "mutate mutants not an id",
        lambda t: _mutate(t, "--mutants", "sglang/srt/gate.py:5"),
        r"--mutants: 'sglang/srt/gate.py:5' is not a mutant id \(FILE.py:LINE:COL:OPERATOR:INDEX\[:NTH\]",
    ),
    BadCli(
        "mutate mutants unknown",
        lambda t: _mutate(t, "--mutants", "sglang/srt/gate.py:5:15:ReplaceComparisonOperator_LtE_Gt:7"),
        r"--mutants: '.*LtE_Gt:7' is not one of cosmic-ray's mutants of that line in this tree",
    ),
    BadCli(
        "mutate mutants file",
        lambda t: _mutate(t, "--mutants", f"@{t / 'none.txt'}"),
        r"--mutants: cannot read '.*none\.txt'",
    ),
    BadCli(
        "mutate not a checkout",
        lambda t: ["mutate", "--sglang", str(t), "--out", str(t / "out")],
        r"--sglang: sglang source .* is not an SGLang checkout",
    ),
]
