"""The front-door rows of the CI-native outputs: ``versions --format`` / ``--junit`` and ``report --junit``.

Each bad value exits 2 in one line naming the option, what was given and what
is accepted, before any release runs or any report step starts (a release is
named, so no package index is listed either).
"""

from __future__ import annotations

from pathlib import Path

from tests.front_door.files import BadCli


def _versions(tmp: Path, *argv: str) -> list[str]:
    """``versions 0.5.23 ARGV`` writing under ``tmp`` (were it to get that far)."""
    return ["versions", "0.5.23", *argv, "--out", str(tmp / "v")]


def _report(tmp: Path, *argv: str) -> list[str]:
    """``report ARGV`` writing under ``tmp`` (were it to get that far)."""
    return ["report", *argv, "--out", str(tmp / "r")]


CI_OUTPUT_ROWS = [
    BadCli(
        "versions format",
        lambda t: _versions(t, "--format", "html"),
        r"--format must be one of 'md', 'json', 'junit', 'families'; got 'html'",
    ),
    BadCli(
        "versions format case",
        lambda t: _versions(t, "--format", "JSON"),
        r"--format must be one of 'md', 'json', 'junit', 'families'; got 'JSON'",
    ),
    BadCli(
        "versions junit directory",
        lambda t: _versions(t, "--junit", str(t)),
        r"--junit: '.*' is a directory; accepted: a file path for the XML",
    ),
    BadCli(
        "versions claims",
        lambda t: _versions(t, "--claims", "C1,X"),
        r"--claims: 'X' is no claim; accepted: comma-separated ids among C1, C2, ",
    ),
    BadCli(
        "report junit directory",
        lambda t: _report(t, "--junit", str(t)),
        r"--junit: '.*' is a directory; accepted: a file path for the XML",
    ),
    BadCli(
        "versions release before the Kimi-K3 path",
        lambda t: _versions(t, "0.5.2"),
        r"'0\.5\.2': no Kimi-K3 image path before SGLang 0\.5\.17; accepted: 0\.5\.17 and later",
    ),
]
