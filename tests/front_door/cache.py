"""Front-door rows of ``deferlab cache`` (reports.core.cache) and of the loader's offline switch.

CLI rows run through ``reports.cli.main`` with the rest (test_front_door.CLI_ROWS): each refusal is one line
naming the argument and what is accepted, before anything is read or removed (a release that is not cached
is checked against whatever cache ``DEFERLAB_CACHE`` names; none is called ``9.9.9``). Python rows: a release
that is not cached while ``DEFERLAB_OFFLINE=1``, and a value of that switch that is neither yes nor no.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from unittest import mock

from deferlab.impl.sglang.sources import SGLangFetchError
from deferlab.reference.system.errors import InputValueError
from tests.front_door.api import Bad
from tests.front_door.files import BadCli
from tests.impl.loader.support import no_download

CACHE_ROWS = [
    BadCli(
        "cache engine", lambda t: ["cache", "prune", "--engine", "tgi"], r"--engine 'tgi': unknown engine; accepted"
    ),
    BadCli("cache release", lambda t: ["cache", "prune", "9.9.9"], r"RELEASE '9.9.9': no .* release 9.9.9 is cached"),
    BadCli("cache days", lambda t: ["cache", "prune", "--older-than", "-3"], r"--older-than '-3': not a number of"),
    BadCli("cache days word", lambda t: ["cache", "prune", "--older-than", "old"], r"--older-than 'old': not a num"),
    BadCli(
        "cache verify engine",
        lambda t: ["cache", "verify", "--engine", "tgi"],
        r"error: --engine 'tgi': unknown engine; accepted: sglang, vllm, lmdeploy$",
    ),
    BadCli(
        "cache verify release",
        lambda t: ["cache", "verify", "9.9.9"],
        r"error: RELEASE '9\.9\.9': no sglang or vllm or lmdeploy release 9\.9\.9 is cached; cached: ",
    ),
    BadCli(
        "cache verify engine's release",
        lambda t: ["cache", "verify", "--engine", "vllm", "9.9.9"],
        r"error: RELEASE '9\.9\.9': no vllm release 9\.9\.9 is cached; cached: ",
    ),
    BadCli(
        "cache folder",
        lambda t: ["cache", "prune", "--folder", "no-such-folder"],
        r"error: --folder 'no-such-folder': the cache holds no such folder; accepted: one listed under 'other folders'",
    ),
    BadCli("cache nothing", lambda t: ["cache", "prune"], r"prune: nothing selected; accepted: RELEASE \.\.\., --eng"),
    BadCli("cache format", lambda t: ["cache", "--format", "xml"], r"--format 'xml': unknown format; accepted: table"),
    BadCli("cache action", lambda t: ["cache", "clean"], r"invalid choice: 'clean'"),
    BadCli("families format", lambda t: ["families", "--format", "xml"], r"--format 'xml': accepted: md, json"),
]


def _offline(tmp: Path, value: str) -> Any:
    """Resolve SGLang 0.5.99 from the empty cache ``tmp`` with ``DEFERLAB_OFFLINE=value`` (no download runs)."""
    from deferlab.impl.loader.sources import resolve
    from deferlab.impl.sglang.sources import ENGINE

    with mock.patch.dict(os.environ, {"DEFERLAB_OFFLINE": value}):
        return resolve(ENGINE, "0.5.99", tmp, no_download)


OFFLINE_ROWS = [
    Bad(
        "offline not cached",
        lambda t: _offline(t, "1"),
        SGLangFetchError,
        r"^sglang 0\.5\.99 is not cached and DEFERLAB_OFFLINE=1 forbids fetching it, .*; cached: none$",
    ),
    Bad(
        "offline switch value",
        lambda t: _offline(t, "maybe"),
        InputValueError,
        r"^DEFERLAB_OFFLINE='maybe' is not accepted; accepted: 1, true, yes or on .*, 0, false, no, off or unset",
    ),
]
