"""Which tree a spec names, found without importing anything: the installed package, a checkout, or a release.

Why a module of its own: `sources` imports an engine's code and keeps one copy per process; finding the tree
comes first and touches nothing in ``sys.modules`` (`resolve`: a release from the cache checked against its
wheel's RECORD and mended where it differs, `integrity.ensure`; a checkout's root, version, commit and whether
its working tree is edited), so a command can refuse a spec before any engine code runs. Every error is the
engine's own `Engine.source_error` (or `Engine.fetch_error` for a download that failed, or was refused under
``DEFERLAB_OFFLINE=1``), the message ending in `Engine.accepted`. `sources` re-exports these names.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deferlab.impl.loader import integrity, wheels
from deferlab.impl.loader.engine import FETCH_FAILED, VERSION, Engine


@dataclass
class Resolved:
    """A tree found for a spec (nothing imported yet)."""

    kind: str  # "installed" | "checkout" | "wheel"
    root: Path  # the folder holding the package
    version: str
    git_rev: str | None = None
    downloaded: bool = False
    wheel: dict[str, str] = field(default_factory=dict)
    git_dirty: bool | None = None  # a checkout: its working tree differs from ``git_rev`` (None: not a git one)
    patch: dict[str, Any] = field(default_factory=dict)  # a copy with a diff applied (`patching`): its description


def check_spec(engine: Engine, spec: object) -> str:
    """``spec`` stripped, or the engine's error for anything but a non-empty string."""
    if not isinstance(spec, str) or not spec.strip():
        raise engine.source_error(f"{engine.name} source {spec!r}: not a non-empty string; {engine.accepted}")
    return spec.strip()


def _release_parts(version: str) -> tuple[int, ...]:
    """The numeric components of a release (``0.5.6.post1`` -> (0, 5, 6, 1)); letters end a component."""
    return tuple(int(m) for m in re.findall(r"\d+", version))


def nearest_release(spec: str, versions: list[str]) -> str | None:
    """The listed release nearest ``spec``: the most leading components shared, then the smallest gap in the
    first component that differs, then the newer. Why not edit distance: ``0.5.24`` should name ``0.5.23``, not
    ``0.5.4``, and ``9.9.9`` the newest release rather than the oldest."""
    want = _release_parts(spec)

    def key(item: tuple[int, str]) -> tuple[int, int, int]:
        order, version = item
        have = _release_parts(version)
        shared = 0
        while shared < min(len(want), len(have)) and want[shared] == have[shared]:
            shared += 1
        if shared == len(want):  # every component asked for matches (0.5.6 -> 0.5.6.post2): no gap
            return (-shared, 0, -order)
        b = have[shared] if shared < len(have) else 0
        return (-shared, abs(want[shared] - b), -order)

    return min(enumerate(versions), key=key)[1] if versions else None


def known_releases(spec: str, versions: list[str], newest: int = 3) -> str:
    """What to say of a release the index does not have: the nearest one and the newest few (the index lists
    oldest first, and a long list of old releases is not what a user asking for a missing one needs)."""
    nearest = nearest_release(spec, versions)
    return f"nearest: {nearest}; newest: {', '.join(versions[-newest:])}; {len(versions)} listed"


def resolve(
    engine: Engine, spec: str, cache: Path | None = None, downloader: wheels.Downloader | None = None
) -> Resolved:
    """The tree ``spec`` names: ``installed``, an existing path (a checkout), or a release version."""
    err, accepted = engine.source_error, engine.accepted
    if spec == "installed":
        found = importlib.util.find_spec(engine.package)
        if found is None or not found.submodule_search_locations:
            raise err(
                f"{engine.name} source 'installed': no {engine.package} package is importable by {sys.executable}; "
                f"{accepted}"
            )
        root = Path(list(found.submodule_search_locations)[0]).resolve().parent
        return Resolved("installed", root, tree_version(engine, root))
    path = Path(spec).expanduser()
    if path.exists():
        root = checkout_root(engine, spec, path)
        rev = git_rev(path)
        dirty = git_dirty(path) if rev else None
        return Resolved("checkout", root, tree_version(engine, root), rev, git_dirty=dirty)
    if VERSION.match(spec):
        try:
            ready = integrity.ensure(engine, spec, cache, downloader)
        except wheels.OfflineError as e:
            raise engine.fetch_error(str(e)) from None
        except wheels.DownloadError as e:
            if e.versions:
                raise err(
                    f"{engine.name} source {spec!r}: the package index has no {engine.distribution}=={spec} "
                    f"({known_releases(spec, e.versions)}); {accepted}"
                ) from None
            if not e.download_failed:
                raise err(f"{engine.name} source {spec!r}: the fetched wheel is unusable ({e}); {accepted}") from None
            raise engine.fetch_error(
                f"{engine.name} source {spec!r}: {FETCH_FAILED} with pip download ({e}); "
                f"is the package index reachable? {accepted}"
            ) from None
        meta = wheels.source_meta(ready.tree)
        if ready.mended:
            meta["mended"] = ready.mended
        return Resolved("wheel", ready.tree.resolve(), spec, None, ready.downloaded, meta)
    if "/" in spec or spec.startswith((".", "~")):
        raise err(f"{engine.name} source {spec!r}: no such path; {accepted}")
    raise err(f"{engine.name} source {spec!r}: neither 'installed', an existing path nor a version; {accepted}")


def checkout_root(engine: Engine, spec: str, path: Path) -> Path:
    """The folder holding the package for a checkout, a package dir or an unzipped wheel."""
    path = path.resolve()
    pkg = engine.package
    inside = path / engine.checkout_subdir if engine.checkout_subdir else None
    for root in (inside, path.parent if path.name == pkg else None, path):
        if root is None or not (root / pkg / "__init__.py").is_file():
            continue
        if not engine.marker or (root / pkg / engine.marker).is_dir():
            return root
    marker = f" and {engine.marker}/" if engine.marker else ""
    raise engine.source_error(
        f"{engine.name} source {spec!r}: {path} is not {engine.article} {engine.title} checkout "
        f"(no {engine.package_path}/ with __init__.py{marker}, and not the {pkg} package folder itself); "
        f"{engine.accepted}"
    )


def tree_version(engine: Engine, root: Path) -> str:
    """The version a tree declares (``<package>/_version.py``, else ``pyproject.toml``), or ``unknown``."""
    for path in (root / engine.package / "_version.py", root / engine.package / "version.py"):
        try:
            tree = ast.parse(path.read_text())
        except (OSError, SyntaxError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                names = {t.id for t in node.targets if isinstance(t, ast.Name)}
                if names & {"__version__", "version"} and isinstance(node.value.value, str):
                    return node.value.value
    for pyproject in (root / "pyproject.toml", root.parent / "pyproject.toml"):
        try:
            match = re.search(r'^version\s*=\s*"([^"]+)"', pyproject.read_text(), re.M)
        except OSError:
            continue
        if match:
            return match.group(1)
    return "unknown"


def git_rev(path: Path) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(path.resolve()), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    rev = out.stdout.strip()
    return rev if out.returncode == 0 and re.fullmatch(r"[0-9a-f]{40}", rev) else None


def git_dirty(path: Path) -> bool | None:
    """Whether the git working tree holding ``path`` differs from its commit: ``git status --porcelain`` lists
    anything (an edit, a staged change, an untracked file); None when git cannot say. Why: a checkout's commit
    alone does not name the code that ran when the tree was edited since."""
    try:
        out = subprocess.run(
            ["git", "-C", str(path.resolve()), "status", "--porcelain"], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return bool(out.stdout.strip()) if out.returncode == 0 else None
