"""Front-door rows of issue 30 item 4 ("the front door, everywhere"): options that used to be checked after the
work, or not at all.

Run through ``reports.cli.main`` with the rest of the CLI rows (test_front_door.CLI_ROWS): each refusal is one
``deferlab: error:`` line naming the option, the value, what is wrong and what is accepted, exit 2, before any
work (sweeps, measurements, a fetch, the claim runs). ``OFFLINE_CLI_ROWS`` set ``DEFERLAB_OFFLINE`` themselves
(`test_front_door.test_offline_switch_is_refused_by_every_command`), on commands that never fetch too.
"""

from __future__ import annotations

from pathlib import Path

from tests.front_door.files import BadCli, _write

_CALIBRATE = r"accepted: a \.toml file path in a folder this user can write"
_SHIPPED = r"accepted: a shipped profile \(gb300-class, calibrated-here\) or the path of a \.toml file"
_NA = r"accepted: a family {} serves \(kimi-k3, .*; `deferlab families` lists them per release\)"

DOOR_ROWS = [
    # sweep --out: checked before the sweeps (minutes), not by a traceback after them
    BadCli("sweep out file", lambda t: ["sweep", "--out", _write(t, "f", "")], r"--out: '.*f' exists and is not a dir"),
    BadCli("sweep out unwritable", lambda t: ["sweep", "--out", "/proc/x"], r"--out: '/proc/x' cannot be written"),
    # calibrate: every argument before any measurement, in the one format
    BadCli("calibrate out dir", lambda t: ["calibrate", "--out", str(t)], r"--out '.*': is a directory; " + _CALIBRATE),
    BadCli(
        "calibrate out not toml",
        lambda t: ["calibrate", "--out", str(t / "p.json")],
        r"--out '.*p\.json': not a \.toml file; " + _CALIBRATE,
    ),
    BadCli(
        "calibrate out unwritable",
        lambda t: ["calibrate", "--out", "/proc/x/p.toml"],
        r"--out '/proc/x/p\.toml': its folder cannot be made or written; " + _CALIBRATE,
    ),
    BadCli(
        "calibrate out under a file",
        lambda t: ["calibrate", "--out", str(Path(_write(t, "f", "")) / "p.toml")],
        r"--out '.*f/p\.toml': its folder cannot be made or written",
    ),
    BadCli("calibrate repeats", lambda t: ["calibrate", "--repeats", "0"], r"--repeats 0: out of range; accepted: an"),
    BadCli("calibrate port", lambda t: ["calibrate", "--port", "70000"], r"--port 70000: not a TCP port; accepted: "),
    # sim --cost-profile: a shipped name or a .toml path, nothing else
    BadCli(
        "sim cost profile json",
        lambda t: ["sim", "chat-tp8", "--cost-profile", "bad.json"],
        r"--cost-profile 'bad\.json': neither a shipped profile nor a \.toml file; " + _SHIPPED,
    ),
    BadCli(
        "sim cost profile missing",
        lambda t: ["sim", "chat-tp8", "--cost-profile", str(t / "nope.toml")],
        r"--cost-profile '.*nope\.toml': no such file; " + _SHIPPED,
    ),
    BadCli(
        "sim cost profile name",
        lambda t: ["sim", "--anchors", "--cost-profile", "tpu-class"],
        r"--cost-profile 'tpu-class': neither a shipped profile nor a \.toml file; " + _SHIPPED,
    ),
    BadCli(
        "sim cost profile content",
        lambda t: ["sim", "chat-tp8", "--cost-profile", _write(t, "p.toml", "[host]\n")],
        r"--cost-profile '.*p\.toml': cost profile .*unknown section\(s\) \['host'\]; accepted",
    ),
    BadCli("sim ipc budget", lambda t: ["sim", "--ipc", "0"], r"--ipc 0: not a budget; accepted: an int >= 1"),
    BadCli("sim two modes", lambda t: ["sim", "--list", "--ipc"], r"--ipc: not allowed with --list; accepted: one of"),
    BadCli(
        "sim cost profile unused",
        lambda t: ["sim", "--list", "--cost-profile", "gb300-class"],
        r"--cost-profile: not used with --list; accepted with SCENARIO or --anchors",
    ),
    BadCli("sim no scenario", lambda t: ["sim"], r"SCENARIO: none given; accepted: a scenario file or shipped name"),
    BadCli("sim unknown option", lambda t: ["sim", "--bogus"], r"unrecognized arguments: --bogus"),
    BadCli("sim missing scenario", lambda t: ["sim", "nothere"], r"'nothere' does not exist; shipped scenarios: \["),
    # a release before the engine's Kimi-K3 path: stated, no package index asked
    BadCli(
        "compare vllm before kimi-k3",
        lambda t: ["compare", "--engine", "vllm", "0.5.22", "0.33.0", "--out", str(t / "c")],
        r"BASE: vllm source '0\.5\.22': no Kimi-K3 image path; accepted: 0\.27\.0 and later",
    ),
    BadCli(
        "compare sglang before kimi-k3",
        lambda t: ["compare", "0.5.23", "0.5.16", "--out", str(t / "c")],
        r"HEAD: sglang source '0\.5\.16': no Kimi-K3 image path; accepted: 0\.5\.17 and later",
    ),
    BadCli(  # the reason is the engine plugin's own (EngineFacts.floor), not Kimi-K3's
        "compare lmdeploy before its first read",
        lambda t: ["compare", "--engine", "lmdeploy", "0.13.0", "0.18.0", "--out", str(t / "c")],
        r"BASE: lmdeploy source '0\.13\.0': no release semantics §19 read; accepted: 0\.14\.0 and later",
    ),
    BadCli(
        "report sglang before kimi-k3",
        lambda t: ["report", "--sglang", "0.5.16", "--out", str(t / "r")],
        r"--sglang: sglang source '0\.5\.16': no Kimi-K3 image path; accepted: 0\.5\.17 and later",
    ),
    # every claim n/a: versions' n/a line at the report's (and compare's) door, not a 2-minute report
    BadCli(
        "report family no column serves",
        lambda t: ["report", "--sglang", "0.5.23", "--model", "mistral3", "--out", str(t / "r")],
        r"--model mistral3: n/a: no SGLang path for Mistral 3 is checked \(semantics §18\); "
        + _NA.format("SGLang 0.5.23"),
    ),
    BadCli(
        "report family no release serves",
        lambda t: ["report", "--vllm", "0.27.0", "--model", "gemma3", "--out", str(t / "r")],
        r"--model gemma3: n/a: vLLM 0\.27\.0 does not serve Gemma 3 \(served by 0\.34\.0 and later\); "
        + _NA.format("vLLM 0.27.0"),
    ),
    BadCli(
        "compare family no side serves",
        lambda t: ["compare", "0.5.22", "0.5.23", "--model", "gemma3", "--out", str(t / "c")],
        r"--model gemma3: n/a: no SGLang path for Gemma 3 is checked .*" + _NA.format("SGLang 0.5.22 or SGLang 0.5.23"),
    ),
    # --impl: resolved once before the claims run, not a failure in every claim test of a finished report
    BadCli(
        "report impl unknown",
        lambda t: ["report", "--impl", "nonsense", "--out", str(t / "r")],
        r"--impl 'nonsense': not a registered name \(deferlab\) nor module:object; accepted: a registered name or "
        r"module:object",
    ),
    BadCli(
        "report impl not a seam",
        lambda t: ["report", "--impl", "os:path", "--out", str(t / "r")],
        r"--impl 'os:path': module lacks \['name', .*; accepted: a registered name or module:object",
    ),
    # output files written last: their folder checked first
    BadCli(
        "report junit unwritable",
        lambda t: ["report", "--junit", "/proc/x/r.xml", "--out", str(t / "r")],
        r"--junit '/proc/x/r\.xml': its folder cannot be made or written; accepted: a file path",
    ),
    BadCli(
        "compare junit unwritable",
        lambda t: ["compare", "0.5.22", "0.5.23", "--junit", "/proc/x/c.xml", "--out", str(t / "c")],
        r"--junit '/proc/x/c\.xml': its folder cannot be made or written",
    ),
    BadCli(
        "versions junit unwritable",
        lambda t: ["versions", "0.5.23", "--junit", "/proc/x/v.xml", "--out", str(t / "v")],
        r"--junit '/proc/x/v\.xml': its folder cannot be made or written",
    ),
    BadCli("bench json dir", lambda t: ["bench", "--json", str(t)], r"--json '.*': is a directory; accepted: a \.json"),
    BadCli(
        "baseline out unwritable",
        lambda t: [
            "baseline",
            "--from",
            _write(t, "r.json", '{"claims": {}, "sweeps": []}'),
            "--out",
            "/proc/x/b.json",
        ],
        r"--out '/proc/x/b\.json': its folder cannot be made or written; accepted: a \.json file path",
    ),
    BadCli(
        "versions jobs",
        lambda t: ["versions", "0.5.23", "--jobs", "0", "--out", str(t / "v")],
        r"--jobs 0: not a number of releases to run at once; accepted: 1 or more",
    ),
    # a user's own video options (semantics §20.3): checked before any release is loaded
    BadCli(
        "versions video fps out of range",
        lambda t: ["versions", "0.5.23", "--video-fps", "0", "--out", str(t / "v")],
        r"--video-fps '0': not a sampling rate deferlab checks; accepted: a number of frames per second from 0\.1 to 240",
    ),
    BadCli(
        "versions video frames not a number",
        lambda t: ["versions", "0.5.23", "--video-frames", "many", "--out", str(t / "v")],
        r"--video-frames 'many': not a whole number; accepted: 1 to 10,000",
    ),
    BadCli(
        "compare video frames out of range",
        lambda t: ["compare", "0.5.22", "0.5.23", "--video-frames", "20000", "--out", str(t / "c")],
        r"--video-frames 20000: out of range; accepted: 1 to 10,000",
    ),
]

# DEFERLAB_OFFLINE=maybe: every command refuses it first, those that never fetch included
OFFLINE_ARGV = [
    ["families"],
    ["cache"],
    ["sim", "--list"],
    ["sweep", "--max-side", "64"],
    ["claims"],
    ["versions", "0.5.23"],
    ["compare", "0.5.22", "0.5.23"],
    ["report", "--from-results", "nowhere"],
    ["test", "--co"],
]
OFFLINE_MATCH = r"^deferlab: error: DEFERLAB_OFFLINE='maybe' is not accepted; accepted: 1, true, yes or on .*, 0, false"

# One run a folder (issue 30 item 4): a folder another run is writing, its lock held here as that run would hold it
_HELD: list[int] = []  # the holders' descriptors, open for the session (the lock is theirs while open)


def _held(tmp: Path, name: str = "out") -> str:
    """``tmp/name`` as a folder another deferlab run (pid 4242) is writing: its lock file, flock-ed here."""
    import fcntl
    import os

    fd = os.open(tmp / f".{name}.deferlab-lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.write(fd, b"4242")
    _HELD.append(fd)
    return str(tmp / name)


_BUSY = r"--out: '.*out' is being written by another deferlab run \(pid 4242\); accepted: a folder no other run is"
LOCK_ROWS = [
    BadCli("report out busy", lambda t: ["report", "--out", _held(t)], _BUSY),
    BadCli("versions out busy", lambda t: ["versions", "0.5.23", "--out", _held(t)], _BUSY),
]

# deferlab findings (semantics §21): the classes, the document and its schema, before anything is written
_EXAMPLE = str(Path(__file__).resolve().parents[2] / "reports" / "example" / "versions-newest" / "versions.json")
_VERSIONS_JSON = r"accepted: a versions\.json written by `deferlab versions` \(schema_version 1\)"
DOOR_ROWS += [
    BadCli(
        "findings unknown fail-on class",
        lambda t: ["findings", _EXAMPLE, "--fail-on", "crash,severe", "--out", str(t / "f")],
        r"--fail-on 'crash,severe': unknown class 'severe'; accepted: a comma list of crash, sequence, tower-input, "
        r"float32-only, cost$",
    ),
    BadCli(
        "findings results of another schema",
        lambda t: ["findings", _write(t, "results.json", '{"schema_version": 1, "claims": {}}'), "--out", str(t / "f")],
        r"RESULTS '.*results\.json': another schema \(no columns, verdicts, .*\); " + _VERSIONS_JSON,
    ),
    BadCli(
        "findings results missing",
        lambda t: ["findings", str(t / "nowhere.json"), "--out", str(t / "f")],
        r"RESULTS '.*nowhere\.json': no such file; " + _VERSIONS_JSON,
    ),
    BadCli(
        "findings results not json",
        lambda t: ["findings", _write(t, "v.json", "{x"), "--out", str(t / "f")],
        r"RESULTS '.*v\.json': not readable JSON \(JSONDecodeError\); " + _VERSIONS_JSON,
    ),
    BadCli(  # issue 32 item 4: the patched document must come from a --patch run of these releases
        "findings patched run without a patch",
        lambda t: ["findings", _EXAMPLE, "--patched", _EXAMPLE, "--out", str(t / "f")],
        r"--patched '.*versions\.json': no release in it was run with --patch; accepted: a versions\.json written "
        r"by `deferlab versions --patch FILE` on releases RESULTS has$",
    ),
    BadCli(
        "findings patched missing",
        lambda t: ["findings", _EXAMPLE, "--patched", str(t / "nowhere.json"), "--out", str(t / "f")],
        r"--patched '.*nowhere\.json': no such file; " + _VERSIONS_JSON,
    ),
]

# deferlab versions --fail-on (semantics §21, issue 32): an unknown class, refused before any release runs
DOOR_ROWS += [
    BadCli(
        "versions unknown fail-on class",
        lambda t: ["versions", "0.5.23", "--fail-on", "sequence,severe", "--out", str(t / "v")],
        r"--fail-on 'sequence,severe': unknown class 'severe'; accepted: a comma list of crash, sequence, "
        r"tower-input, float32-only, cost$",
    ),
    BadCli(
        "versions empty fail-on class",
        lambda t: ["versions", "0.5.23", "--fail-on", "crash,", "--out", str(t / "v")],
        r"--fail-on 'crash,': an empty class name; accepted: a comma list of crash, sequence, tower-input, "
        r"float32-only, cost$",
    ),
]

# --patch FILE (issue 32 item 4): a unified diff of the engine's package, checked before anything loads
_DIFF = "accepted: a unified diff \\(git diff, diff -u\\) of text files of an engine's tree"
_VLLM_DIFF = "--- a/python/vllm/x.py\n+++ b/python/vllm/x.py\n@@ -1 +1 @@\n-a\n+b\n"
DOOR_ROWS += [
    BadCli(
        "report patch not a diff",
        lambda t: ["report", "--sglang", "0.5.23", "--patch", _write(t, "fix.diff", "hello\n"), "--out", str(t / "r")],
        r"--patch: patch '.*fix\.diff': not a unified diff \(no '--- a/PATH', '\+\+\+ b/PATH' and '@@' hunk\); "
        + _DIFF,
    ),
    BadCli(
        "report patch without engine",
        lambda t: ["report", "--patch", _write(t, "fix.diff", _VLLM_DIFF), "--out", str(t / "r")],
        r"--patch: no engine's tree is loaded to patch .*; accepted with --sglang SPEC or --vllm SPEC",
    ),
    BadCli(
        "versions patch missing",
        lambda t: ["versions", "0.5.23", "--patch", str(t / "nope.diff"), "--out", str(t / "v")],
        r"--patch: patch '.*nope\.diff': cannot be read \(No such file or directory\); " + _DIFF,
    ),
    BadCli(
        "versions patch hunk cut short",
        lambda t: ["versions", "0.5.23", "--patch", _write(t, "f.diff", _VLLM_DIFF[:-3]), "--out", str(t / "v")],
        r"--patch: patch '.*f\.diff': hunk #1 of python/vllm/x\.py \(line 3\) is cut short: 1/1 old and 0/1 new",
    ),
    BadCli(
        "compare patch of another engine",
        lambda t: ["compare", "0.5.22", "0.5.23", "--patch", _write(t, "f.diff", _VLLM_DIFF), "--out", str(t / "c")],
        r"--patch: patch '.*f\.diff' changes python/vllm/x\.py, outside the package of sglang; accepted: a diff of "
        r"files under sglang/ or python/sglang/$",
    ),
]
