"""Front-door rows of ``deferlab compare`` and ``deferlab repro`` (reports.compare.cli, reports.repro.cli).

Run through ``reports.cli.main`` with the rest of the CLI rows (test_front_door.CLI_ROWS): each one-line
refusal names what was given and what is accepted, and nothing is loaded or written before it. A reproducer
runs on the engine its header names: the other engine's option is refused.
"""

from __future__ import annotations

from pathlib import Path

from tests.front_door.files import BadCli, _write


def _git_checkout(tmp: Path) -> str:
    """A one-commit git repository in ``tmp/repo`` (its path)."""
    import subprocess

    repo = tmp / "repo"
    (repo / "python" / "sglang").mkdir(parents=True)
    (repo / "python" / "sglang" / "__init__.py").write_text("")
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)
    return str(repo)


def _reproducer(tmp: Path) -> str:
    return _write(tmp, "C3-sglang-0.5.23.py", "# deferlab reproducer (format 1): claim C3 on sglang-0.5.23\n")


def _vllm_reproducer(tmp: Path) -> str:
    """A vLLM reproducer's header: its Run line names ``--vllm``, which `reports.repro.cli.read_header` reads."""
    return _write(
        tmp,
        "C14-vllm-0.33.0.py",
        "# deferlab reproducer (format 1): claim C14 on vllm-0.33.0\n# Spec: 0.33.0\n"
        "# Run: pytest THIS_FILE where that engine is installed, or deferlab repro THIS_FILE --vllm SPEC (deferlab's\n",
    )


COMPARE_CLI_ROWS = [
    BadCli("compare same source", lambda t: ["compare", "0.5.23", "0.5.23"], r"BASE and HEAD are the same source"),
    BadCli(
        "compare revision not a git checkout",
        lambda t: ["compare", f"{t}@HEAD", "0.5.23"],
        r"BASE: '.*@HEAD': '.*' is not a git checkout \(.*\); accepted: a release such as 0\.5\.23",
    ),
    BadCli(
        "compare unknown revision",
        lambda t: ["compare", "0.5.23", f"{_git_checkout(t)}@no-such-rev"],
        r"HEAD: '.*@no-such-rev': unknown revision 'no-such-rev' in the git checkout .*; accepted: a commit",
    ),
    BadCli(
        "compare revision path missing",
        lambda t: ["compare", f"{t}/nowhere@HEAD", "0.5.23"],
        r"BASE: '.*/nowhere@HEAD': no such path '.*/nowhere'; accepted:",
    ),
    BadCli(
        "compare not a version",
        lambda t: ["compare", "latest", str(t), "--out", str(t / "c")],
        r"BASE: sglang source 'latest': neither 'installed', an existing path, a version nor PATH@REV; accepted: a "
        r"release such as 0\.5\.23",
    ),
    BadCli(
        "compare missing path",
        lambda t: ["compare", "/nonexistent/sglang", "0.5.23"],
        r"BASE: sglang source '/nonexistent/sglang': no such path; accepted: a release such as 0\.5\.23, 'installed', "
        r"an SGLang checkout path, or PATH@REV",
    ),
    BadCli(
        "compare engine",
        lambda t: ["compare", "0.5.22", "0.5.23", "--engine", "tensorrt"],
        r"--engine must be one of 'sglang', 'vllm', 'lmdeploy'; got 'tensorrt'",
    ),
    BadCli(
        "compare vllm revision not a git checkout",
        lambda t: ["compare", f"{t}@HEAD", "0.33.0", "--engine", "vllm"],
        r"BASE: '.*@HEAD': '.*' is not a git checkout \(.*\); accepted: a release such as 0\.33\.0, 'installed', a vLLM",
    ),
    BadCli("compare profile", lambda t: ["compare", "0.5.22", "0.5.23", "--profile", "fast"], r"--profile must be one"),
    BadCli("compare format", lambda t: ["compare", "0.5.22", "0.5.23", "--format", "html"], r"--format must be one"),
    BadCli(
        "compare out file",
        lambda t: ["compare", "0.5.22", "0.5.23", "--out", _write(t, "f", "")],
        r"--out: .* exists and is not a directory",
    ),
    BadCli(
        "repro not a reproducer",
        lambda t: ["repro", _write(t, "x.py", "def test_x():\n    pass\n"), "--sglang", "0.5.23"],
        r"FILE: '.*x\.py' is not a deferlab reproducer \(first line 'def test_x\(\):'\); accepted: a repro/",
    ),
    BadCli(
        "repro missing path",
        lambda t: ["repro", _reproducer(t), "--sglang", f"{t}/nowhere/sglang"],
        r"--sglang: sglang source '.*/nowhere/sglang': no such path; accepted:",
    ),
    BadCli("repro no file", lambda t: ["repro", str(t / "C3.py")], r"FILE: '.*C3\.py' does not exist or is not a file"),
    BadCli(
        "repro not a version",
        lambda t: ["repro", _reproducer(t), "--sglang", "latest"],
        r"--sglang: sglang source 'latest': neither 'installed', an existing path, a version nor PATH@REV; accepted:",
    ),
    BadCli(
        "repro vllm reproducer on sglang",
        lambda t: ["repro", _vllm_reproducer(t), "--sglang", "0.5.23"],
        r"--sglang: '.*C14-vllm-0\.33\.0\.py' is a vLLM reproducer \(claim C14 on vllm-0\.33\.0\); accepted for it: "
        r"--vllm SPEC",
    ),
    BadCli(
        "repro sglang reproducer on vllm",
        lambda t: ["repro", _reproducer(t), "--vllm", "0.33.0"],
        r"--vllm: '.*C3-sglang-0\.5\.23\.py' is an SGLang reproducer \(claim C3 on sglang-0\.5\.23\); accepted for "
        r"it: --sglang SPEC",
    ),
    BadCli(
        "repro vllm not a version",
        lambda t: ["repro", _vllm_reproducer(t), "--vllm", "latest"],
        r"--vllm: vllm source 'latest': neither 'installed', an existing path, a version nor PATH@REV; accepted: a "
        r"release such as 0\.33\.0",
    ),
]
