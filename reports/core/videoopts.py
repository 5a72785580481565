"""The commands' video options (``--video-fps``, ``--video-frames``): a user's own serving options, added to the
option sets the video claims sweep (semantics §20.3).

Why an option of the command and not of the claims: a user who serves with ``fps=1`` wants the verdict for that
setting beside the defaults; the children that run the engines read it from one environment variable
(`reference.system.video.OPTIONS_ENV`), checked here at the front door (one line, exit 2) before any step.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from deferlab.reference.system.errors import UsageError
from deferlab.reference.system.video import FPS_RANGE, FRAMES_RANGE, OPTIONS_ENV, check_options


def add(p: argparse.ArgumentParser) -> None:
    """``--video-fps F`` and ``--video-frames N`` on a command that runs the video claims."""
    p.add_argument(
        "--video-fps",
        metavar="F",
        default=None,
        help=f"also sweep the video claims with this sampling rate ({FPS_RANGE[0]:g}-{FPS_RANGE[1]:g})",
    )
    p.add_argument("--video-frames", metavar="N", default=None,
                   help=f"also sweep the video claims with this frame count ({FRAMES_RANGE[0]}-{FRAMES_RANGE[1]:,})")  # fmt: skip


def env(args: argparse.Namespace) -> dict[str, str]:
    """The children's environment for the options given (empty when none); a bad value is a `UsageError`."""
    try:
        given = check_options(getattr(args, "video_fps", None), getattr(args, "video_frames", None))
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return {OPTIONS_ENV: json.dumps(given)} if given else {}


def describe(found: dict[str, str]) -> dict[str, Any]:
    """The options as recorded beside a run's verdicts (``{}``: the defaults only)."""
    return json.loads(found[OPTIONS_ENV]) if OPTIONS_ENV in found else {}
