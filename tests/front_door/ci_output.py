"""The front-door rows of the CI-native outputs: ``versions --format`` / ``--junit`` and ``report --junit``.

Each bad value exits 2 in one line naming the option, what was given and what
is accepted, before any release runs or any report step starts (a release is
named, so no package index is listed either).
"""

from __future__ import annotations

from tests.front_door.files import BadCli

CI_OUTPUT_ROWS = [
    BadCli(
        "versions format",
        lambda t: ["versions", "0.5.23", "--format", "html", "--out", str(t / "v")],
        r"--format must be one of 'md', 'json', 'junit', 'families'; got 'html'",
    ),
    BadCli(
        "versions format case",
        lambda t: ["versions", "0.5.23", "--format", "JSON", "--out", str(t / "v")],
        r"--format must be one of 'md', 'json', 'junit', 'families'; got 'JSON'",
    ),
    BadCli(
        "versions junit directory",
        lambda t: ["versions", "0.5.23", "--junit", str(t), "--out", str(t / "v")],
        r"--junit: '.*' is a directory; accepted: a file path for the XML",
    ),
    BadCli(
        "versions claims",
        lambda t: ["versions", "0.5.23", "--claims", "C1,X", "--out", str(t / "v")],
        r"--claims: 'X' is no claim; accepted: comma-separated ids among C1, C2, ",
    ),
    BadCli(
        "report junit directory",
        lambda t: ["report", "--junit", str(t), "--out", str(t / "r")],
        r"--junit: '.*' is a directory; accepted: a file path for the XML",
    ),
    BadCli(
        "versions release before the Kimi-K3 path",
        lambda t: ["versions", "0.5.23", "0.5.2", "--out", str(t / "v")],
        r"'0\.5\.2': no Kimi-K3 path before SGLang 0\.5\.17; accepted: 0\.5\.17 and later",
    ),
]
