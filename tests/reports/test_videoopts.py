"""The commands' video options reach the claims' children as one environment variable (semantics §20.3)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import pytest

from deferlab.reference.system.errors import UsageError
from deferlab.reference.system.video import OPTIONS_ENV
from deferlab.reports.core import videoopts


def _args(**given) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    videoopts.add(p)
    return p.parse_args([x for k, v in given.items() for x in (f"--{k.replace('_', '-')}", v)])


def test_no_option_no_environment() -> None:
    assert videoopts.env(_args()) == {}


def test_the_options_are_one_json_variable() -> None:
    found = videoopts.env(_args(video_fps="0.5", video_frames="12"))
    assert json.loads(found[OPTIONS_ENV]) == {"fps": 0.5, "num_frames": 12}
    assert videoopts.describe(found) == {"fps": 0.5, "num_frames": 12}


def test_a_bad_value_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="--video-fps '-1'"):
        videoopts.env(_args(video_fps="-1"))


def test_a_child_sweeps_the_users_options_after_the_shipped_ones() -> None:
    env = {**os.environ, OPTIONS_ENV: json.dumps({"fps": 0.5})}
    code = "from deferlab.properties import video_claims as vc; print([r.label() for r in vc.OPTION_SETS])"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    labels = eval(out)  # noqa: S307 - our own child's printed list
    assert labels[-1] == "fps=0.5" and labels[0] == "defaults" and len(labels) == 7
