"""The front-door rows of ``deferlab mutate``: each bad argument exits 2 in one line before anything runs.

The rows point ``--sglang`` at the fake engine tree of the mutate tests
(``tests/reports/mutate_fake/python``: shaped like an SGLang checkout,
so it resolves without importing anything; the folder above it is the
checkout's top, with its fake unit tests for ``--anchor``) and ``--vllm`` at
its fake vLLM checkout (``mutate_fake/vllm_tree``) where a row needs a tree.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from deferlab.reference.system.systems import engine
from tests.front_door.files import BadCli

FAKE = Path(__file__).resolve().parents[1] / "reports" / "mutate_fake" / "python"
VLLM_FAKE = FAKE.parent / "vllm_tree"


def _mutate(tmp: Path, *argv: str) -> list[str]:
    return ["mutate", "--sglang", str(FAKE), "--out", str(tmp / "out"), *argv]


def _vllm(tmp: Path, *argv: str) -> list[str]:
    return ["mutate", "--vllm", str(VLLM_FAKE), "--out", str(tmp / "out"), *argv]


def _bare_checkout(tmp: Path) -> str:
    """A copy of the fake checkout without its unit tests (``python/sglang`` only)."""
    shutil.copytree(FAKE / "sglang", tmp / "bare" / "python" / "sglang")
    return str(tmp / "bare")


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
    BadCli(
        "mutate out not writable",
        lambda t: ["mutate", "--sglang", str(FAKE), "--out", "/proc/deferlab-mutate"],
        r"--out: '/proc/deferlab-mutate' cannot be written",
    ),
    BadCli("mutate sample", lambda t: _mutate(t, "--sample", "0"), r"--sample must be an int >= 1, got 0"),
    BadCli("mutate jobs", lambda t: _mutate(t, "--jobs", "0"), r"--jobs must be an int >= 1, got 0"),
    BadCli("mutate timeout", lambda t: _mutate(t, "--timeout", "0"), r"--timeout must be a number of seconds > 0"),
    BadCli(
        "mutate profile",
        lambda t: _mutate(t, "--profile", "fast"),
        r"--profile must be one of 'ci', 'dev', 'thorough'; got 'fast'",
    ),
    BadCli("mutate claims", lambda t: _mutate(t, "--claims", "C3,C99"), r"--claims: unknown claim\(s\) C99; claims"),
    BadCli("mutate resume nothing", lambda t: _mutate(t, "--resume"), r"--resume: .* holds no campaign"),
    BadCli(
        "mutate baseline",
        lambda t: _mutate(t, "--baseline", _baseline(t)),
        r"--baseline: .*mb\.json' is not a deferlab baseline \(schema_version 1 or 2\)",
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
    BadCli(
        "mutate both engines",
        lambda t: _mutate(t, "--vllm", str(VLLM_FAKE)),
        r"--sglang and --vllm are mutually exclusive: a campaign mutates one engine's code; give one",
    ),
    BadCli(
        "mutate no engine",
        lambda t: ["mutate", "--out", str(t / "out")],
        r"deferlab mutate needs --sglang SPEC or --vllm SPEC",
    ),
    BadCli(
        "mutate vllm not a checkout",
        lambda t: ["mutate", "--vllm", str(t), "--out", str(t / "out")],
        r"--vllm: vllm source .* is not a vLLM checkout",
    ),
    BadCli(
        "mutate vllm claims",
        lambda t: _vllm(t, "--claims", "C3"),
        r"--claims: unknown claim\(s\) C3; vLLM runs " + ", ".join(engine("vllm").claims or ()),
    ),
    BadCli(
        "mutate anchor release",
        lambda t: ["mutate", "--sglang", "0.5.23", "--anchor", "--out", str(t / "out")],
        r"--anchor: sglang '0\.5\.23' is a release, and a release wheel carries no unit tests .*give a source checkout",
    ),
    BadCli(
        "mutate anchor vllm",
        lambda t: _vllm(t, "--anchor"),
        r"--anchor: the anchor is SGLang's own unit tests; it runs with --sglang CHECKOUT, not --vllm",
    ),
    BadCli(
        "mutate anchor no unit tests",
        lambda t: ["mutate", "--sglang", _bare_checkout(t), "--anchor", "--out", str(t / "out")],
        r"--anchor: the checkout .*bare carries no unit tests \(no test_\*\.py in a unit folder under test/\)",
    ),
    BadCli(
        "mutate anchor untested target",
        lambda t: _mutate(t, "--anchor", "--target", "sglang/srt/extra.py"),
        r"--anchor: no unit test in the checkout .* imports the targeted files \(sglang\.srt\.extra\)",
    ),
    BadCli(
        "mutate anchor no such test",
        lambda t: _mutate(t, "--anchor", "test/nope.py"),
        r"--anchor: no test file or folder 'test/nope\.py'",
    ),
    BadCli(
        "mutate cluster address",
        lambda t: _mutate(t, "--cluster", "nowhere"),
        r"--cluster: 'nowhere' is no cluster address; accepted: 'auto' .*'ray://HOST:PORT', or 'local'",
    ),
    BadCli(
        "mutate cluster nobody answers",
        lambda t: ["mutate", "--sglang", "0.5.23", "--cluster", "ray://127.0.0.1:1", "--out", str(t / "out")],
        r"--cluster: ray://127\.0\.0\.1:1: nobody answers at 127\.0\.0\.1:1 \(.*\); accepted: 'auto'",
    ),
    BadCli(
        "mutate cluster remote checkout",
        lambda t: _mutate(t, "--cluster", "ray://127.0.0.1:1"),
        r"--cluster ray://127\.0\.0\.1:1: --sglang '.*python' is a path on this machine, which a worker does not "
        r"have; accepted with a remote cluster: a release version \(or --cluster local\)",
    ),
    BadCli(
        "mutate cluster anchor",
        lambda t: _mutate(t, "--anchor", "--cluster", "local"),
        r"--cluster local: --anchor runs the checkout's unit tests on this machine; run the anchor without --cluster",
    ),
    BadCli(
        "mutate vllm update baseline",
        lambda t: _vllm(t, "--update-baseline"),
        r"--update-baseline with --vllm needs --baseline FILE \(the default, mutate_baseline\.json, is SGLang's",
    ),
]
