"""How the loader runs a child of its own (``pip download``, ``pip index versions``): one replaceable function.

Why replaceable: the loader runs inside commands that own every child they start (`reports.core.process`: its
own process group, killed at once on Ctrl-C or SIGTERM, and by the janitor if the command is killed). A plain
``subprocess.run`` here would be invisible to that, so a stop would wait for a download to finish (minutes) and a
killed command would leave pip running. The CLI's process module installs its own `capture` here on import;
without it (the loader used as a library) the plain one runs.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence

Capture = Callable[[Sequence[str], float], tuple[int | None, str, str]]


def _plain(cmd: Sequence[str], timeout: float) -> tuple[int | None, str, str]:
    try:
        proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as e:
        return None, str(e.stdout or ""), str(e.stderr or "")
    return proc.returncode, proc.stdout, proc.stderr


_CAPTURE: list[Capture] = [_plain]


def install(capture: Capture) -> None:
    """Run the loader's children through ``capture`` from now on (the CLI's managed one)."""
    _CAPTURE[0] = capture


def capture(cmd: Sequence[str], timeout: float) -> tuple[int | None, str, str]:
    """``cmd`` to its end: (exit status, or None at ``timeout``; stdout; stderr)."""
    return _CAPTURE[0](cmd, timeout)
