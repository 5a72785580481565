"""What the loader needs to know about an engine, and the two errors its loading raises.

Why a frozen description: resolution, the wheel cache and the importer are
the same for every project whose code deferlab runs on a CPU; only names
differ (distribution, import package, where the package sits in a checkout,
the modules the driver runs). The driver states them once, e.g.
``Engine(name="sglang", distribution="sglang", package="sglang", checkout_subdir="python", required=(...))``;
a real engine's names are read off its registration (`registered`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from deferlab.reference.system.engines import engine as _registration
from deferlab.reference.system.errors import SourceError as _InputSourceError

# The start of the message of a fetch that failed: a child process that prints the error is read by it.
FETCH_FAILED = "could not fetch the wheel"
VERSION = re.compile(r"^\d+(\.\d+){1,3}((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?$")


class SourceError(_InputSourceError):
    """The source asked for cannot be used (the message says what was tried and what is accepted)."""


class FetchError(SourceError):
    """A release's wheel is not cached and ``pip download`` could not get it (offline, no index, timed out).

    The one load failure that says nothing about the engine or its driver: a test may skip on it, on no other.
    """


@dataclass(frozen=True)
class Engine:
    """One engine: its names, its layout, and how its driver wants failures and stand-ins worded.

    ``marker``: a folder the package must hold for a path to count as a checkout. ``functional``:
    module name -> (builder, note) for the functional stand-ins the driver ships. ``driver_dirs``:
    folders of the driver's own code (their frames are never the engine's import lines). ``required``: the
    modules the default build imports for real (`sources.load` without ``build``; a driver's own build imports
    its own list).
    """

    name: str
    distribution: str
    package: str
    checkout_subdir: str = ""
    required: tuple[str, ...] = ()
    display: str = ""
    article: str = "a"
    marker: str = ""
    example_version: str = "1.0.0"
    bare_why: str = "package __init__.py not run"
    functional: Mapping[str, tuple[Callable[[str], ModuleType], str]] = field(default_factory=dict)
    driver_dirs: tuple[str, ...] = ()
    source_error: type[SourceError] = SourceError
    fetch_error: type[FetchError] = FetchError
    # Which members of a release wheel to unpack (None: all). A wheel of compiled kernels the driver never runs
    # (vLLM's is 336 MB, mostly CUDA libraries) unpacks in seconds when only its Python sources are taken.
    wheel_members: Callable[[str], bool] | None = None
    # Whether packages load bare (their ``__init__.py`` run only on demand). An engine's do (its inits pull in
    # the server); a companion library's (`impl.loader.companions`) run, guarded: transformers' init is its lazy
    # module table, which every ``from transformers import X`` reads.
    bare_packages: bool = True

    @property
    def title(self) -> str:
        return self.display or self.name

    @property
    def package_path(self) -> str:
        """``python/sglang`` style: where the package sits inside a checkout."""
        return f"{self.checkout_subdir}/{self.package}" if self.checkout_subdir else self.package

    @property
    def accepted(self) -> str:
        """The sentence every source error ends with: the three kinds of spec."""
        return (
            f"accepted: 'installed' (the {self.package} importable here), a path to {self.article} {self.title} "
            f"source checkout (a folder holding {self.package_path}/, or the {self.package} package folder itself), "
            f"or a release version such as '{self.example_version}' (fetched with pip download into the deferlab "
            "cache)"
        )

    def owns(self, module: str) -> bool:
        """Whether ``module`` is the engine's package or inside it."""
        return module == self.package or module.startswith(self.package + ".")


def registered(name: str, driver_file: str, **layout: Any) -> Engine:
    """The `Engine` of real engine ``name``, its names read off its registration (`reference.system.engines`):
    distribution, import package, display name, article and example release as its plugin declares them (the
    distribution and the package may differ); its driver's code is the folder of ``driver_file``. ``layout``: the
    rest (`Engine`'s other fields)."""
    facts = _registration(name)
    return Engine(
        name=facts.name,
        distribution=facts.distribution,
        package=facts.package,
        display=facts.display,
        article=facts.article,
        example_version=facts.example_release,
        driver_dirs=(os.path.dirname(os.path.abspath(driver_file)),),
        **layout,
    )
