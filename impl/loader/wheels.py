"""Fetch an engine's release wheel once, unzip it, and never leave half a copy behind.

Why a wheel and not ``pip install``: the driver must read one exact release's
files without installing its serving dependencies (or replacing whatever copy
the environment has). ``pip download --no-deps`` fetches the wheel through the
ordinary client; it is unzipped into ``<cache>/<version>``, put on
``sys.path`` of this process only.

Atomicity: everything is built in ``<cache>/.tmp-<version>-*`` and renamed to
``<cache>/<version>`` only when the wheel is downloaded, verified as a zip and
unzipped. A run interrupted at any point leaves at most a ``.tmp-*`` folder,
which no later run reads (and which is swept once it is an hour old). A
folder named after the version therefore always holds a complete tree, and a
second run downloads nothing.

What a release folder holds: the unpacked members, ``deferlab-source.json``
(`source_meta`: the wheel's name, sha256, where pip got it, when), the wheel
itself under ``wheel/`` (kept, so a damaged tree is mended without the
network: `impl.loader.integrity`), ``deferlab-RECORD`` (the wheel's own
RECORD, verbatim: the sha256 of every file it ships, what the tree is checked
against, and which of the engine's modules are compiled) and ``deferlab-METADATA``
(the wheel's METADATA, verbatim: the versions of its dependencies it accepts);
reading and writing those files is `release_files`, re-exported here. ``DEFERLAB_OFFLINE=1``
(`offline`) fetches nothing: a release that is not cached is refused.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

from deferlab.impl.loader import children
from deferlab.impl.loader.engine import FETCH_FAILED, Engine
from deferlab.impl.loader.release_files import (  # noqa: F401 - what a release folder holds, re-exported
    META,
    METADATA,
    RECORD,
    WHEEL_DIR,
    dist_info_member,
    kept_wheel,
    metadata_text,
    read_record,
    record_member,
    sha256_file,
    shipped_modules,
    source_meta,
    write_atomic,
    write_meta,
)
from deferlab.reference.system.errors import InputValueError
from deferlab.reference.system.systems import sorted_releases

Downloader = Callable[[str, Path], Path]

ORIGIN = "origin.json"  # where a downloader may say where the wheel came from (folded into META)
OFFLINE_ENV = "DEFERLAB_OFFLINE"
_ON, _OFF = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")
_STALE_TMP_S = 3600
_FROM_VERSIONS = re.compile(r"from versions:\s*([^)]*)\)")
_GOT = re.compile(r"^\s*(?:Downloading|Using cached|File was already downloaded)\s+(\S+)", re.M)
_INDEXES = re.compile(r"^\s*Looking in indexes:\s*(.+)$", re.M)


class DownloadError(RuntimeError):
    """pip could not provide the wheel; ``versions`` is what the index listed (None when it was unreachable).

    ``download_failed`` is False when a wheel arrived but is unusable (not a zip, a corrupt member, no
    package folder): a finding about the wheel, where a failed download says nothing about it."""

    def __init__(self, message: str, versions: list[str] | None, *, download_failed: bool = True) -> None:
        super().__init__(message)
        self.versions = versions
        self.download_failed = download_failed


class OfflineError(DownloadError):
    """``DEFERLAB_OFFLINE=1`` and what the load needs is not in the cache: nothing was fetched (the message says
    what is missing and what is cached)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, None)


def deferlab_cache() -> Path:
    """deferlab's cache folder: ``$DEFERLAB_CACHE`` when set, else ``~/.cache/deferlab`` (wheels, checkouts,
    mutation references and strategy scans each keep a folder under it)."""
    base = os.environ.get("DEFERLAB_CACHE")
    return Path(base).expanduser() if base else Path.home() / ".cache" / "deferlab"


def cache_root(engine: Engine) -> Path:
    """``$DEFERLAB_CACHE/<name>`` when ``DEFERLAB_CACHE`` is set, else ``~/.cache/deferlab/<name>``."""
    return deferlab_cache() / engine.name


def offline() -> bool:
    """Whether ``DEFERLAB_OFFLINE`` forbids fetching (1/true/yes/on); `InputValueError` for any other value
    than those and 0/false/no/off/unset, so a typo never silently fetches."""
    value = os.environ.get(OFFLINE_ENV, "").strip().lower()
    if value in _ON or value in _OFF:
        return value in _ON
    raise InputValueError(
        f"{OFFLINE_ENV}={os.environ[OFFLINE_ENV]!r} is not accepted; accepted: 1, true, yes or on (load only cached "
        "releases), 0, false, no, off or unset (fetch what is not cached)"
    )


def refuse_offline(engine: Engine, version: str, what: str, cache: Path | None = None) -> OfflineError:
    """The one-line refusal of a fetch under ``DEFERLAB_OFFLINE=1``: ``what`` is missing (e.g. "is not cached"),
    and what is cached instead. It carries `FETCH_FAILED`, the words a child's reader skips on."""
    cached = ", ".join(cached_versions(engine, cache)) or "none"
    return OfflineError(
        f"{engine.name} {version} {what} and {OFFLINE_ENV}=1 forbids fetching it, so deferlab {FETCH_FAILED}; "
        f"cached: {cached}"
    )


def cached_tree(engine: Engine, version: str, cache: Path | None = None) -> Path | None:
    """The complete unzipped tree of ``version`` if a previous run left one, else None."""
    final = (cache or cache_root(engine)) / version
    return final if (final / engine.package).is_dir() and (final / META).is_file() else None


def cached_versions(engine: Engine, cache: Path | None = None) -> list[str]:
    """The releases of ``engine`` with a complete tree in the cache, in release order."""
    root = cache or cache_root(engine)
    try:
        names = [p.name for p in root.iterdir() if not p.name.startswith(".")]
    except OSError:
        return []
    return sorted_releases(n for n in names if cached_tree(engine, n, root) is not None)


def pip_downloader(engine: Engine) -> Downloader:
    """The default downloader of ``engine``: `pip_download` of its distribution."""
    return lambda version, dest: pip_download(engine.distribution, version, dest)


def pip_download(distribution: str, version: str, dest: Path) -> Path:
    """``python -m pip download --no-deps DISTRIBUTION==VERSION`` into ``dest``; the wheel's path. Where pip got
    it (the index it looked in, the file it named) goes to ``dest/origin.json`` for the release's `source_meta`."""
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--no-input",
        "-d",
        str(dest),
        f"{distribution}=={version}",
    ]
    rc, stdout, stderr = children.capture(cmd, 900)
    if rc is None:
        raise DownloadError(f"pip download {distribution}=={version} timed out after 900 s", None)
    wheels = sorted(dest.glob(f"{re.sub(r'[-_.]+', '_', distribution)}-*.whl"))
    if rc == 0 and wheels:
        (dest / ORIGIN).write_text(json.dumps(pip_origin(stdout)))
        return wheels[0]
    text = stderr + stdout
    match = _FROM_VERSIONS.search(text)
    versions = None
    if match and match.group(1).strip() not in ("", "none"):
        versions = [v.strip() for v in match.group(1).split(",") if v.strip()]
    last = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("WARNING: Location")]
    raise DownloadError(last[-1] if last else f"pip exited {rc}", versions)


def pip_origin(output: str) -> dict[str, str]:
    """Where pip says it got a wheel: ``index`` (the one it looked in: "Looking in indexes", else PyPI, pip's
    default) and ``url`` when it logged a whole URL (it shows only the file name for PyPI's files)."""
    indexes = _INDEXES.search(output)
    origin = {"index": indexes.group(1).strip() if indexes else "https://pypi.org/simple (pip's default)"}
    got = _GOT.search(output)
    if got and "://" in got.group(1):
        origin["url"] = got.group(1)
    return origin


def fetch(
    engine: Engine, version: str, cache: Path | None = None, downloader: Downloader | None = None
) -> tuple[Path, bool]:
    """(tree, downloaded_now): the unzipped wheel of ``version``, fetching it only if not cached (and never
    under ``DEFERLAB_OFFLINE=1``: `OfflineError`)."""
    cache = cache or cache_root(engine)
    found = cached_tree(engine, version, cache)
    if found is not None:
        return found, False
    if offline():
        raise refuse_offline(engine, version, "is not cached", cache)
    tmp = build_tree(engine, version, cache, downloader)
    final = cache / version
    try:
        os.rename(tmp, final)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if cached_tree(engine, version, cache) is None:  # not a concurrent winner: a real failure
            raise
    return final, True


def replace(engine: Engine, version: str, cache: Path | None = None, downloader: Downloader | None = None) -> Path:
    """Fetch ``version`` again and put the new tree where the old one was (a release folder that cannot be
    mended): the old folder is renamed aside first, so the folder is always one whole tree or absent."""
    cache = cache or cache_root(engine)
    if offline():
        raise refuse_offline(engine, version, "must be fetched again", cache)
    tmp = build_tree(engine, version, cache, downloader)
    final = cache / version
    remove_release(final)
    os.rename(tmp, final)
    return final


def remove_release(folder: Path) -> bool:
    """Remove a release folder whole: renamed to a ``.tmp-`` sibling (atomic), then deleted; False if absent.
    An interrupted delete leaves only the ``.tmp-`` folder, which no run reads and `sweep` removes."""
    if not folder.exists():
        return False
    aside = Path(tempfile.mkdtemp(prefix=f".tmp-gone-{folder.name}-", dir=folder.parent))
    os.rename(folder, aside / folder.name)
    shutil.rmtree(aside, ignore_errors=True)
    return True


def build_tree(engine: Engine, version: str, cache: Path, downloader: Downloader | None = None) -> Path:
    """A complete release folder of ``version`` in ``<cache>/.tmp-<version>-*`` (downloaded, checked as a zip,
    unpacked, its wheel kept); the caller renames it into place. Nothing is left behind on any failure."""
    cache.mkdir(parents=True, exist_ok=True)
    sweep(cache)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{version}-", dir=cache))
    try:
        wheel = (downloader or pip_downloader(engine))(version, tmp / WHEEL_DIR)
        unpack(engine, wheel, tmp)
        origin_file = wheel.parent / ORIGIN
        origin = json.loads(origin_file.read_text()) if origin_file.is_file() else {}
        origin_file.unlink(missing_ok=True)
        write_meta(tmp, version, wheel, origin)
        os.chmod(tmp, 0o755)  # mkdtemp made it private; the finished tree is an ordinary readable folder
        return tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def unpack(engine: Engine, wheel: Path, dest: Path) -> None:
    """Unzip the members of ``wheel`` the engine keeps (`Engine.wheel_members`) into ``dest``, and its RECORD
    verbatim as ``dest/deferlab-RECORD``; `DownloadError` (not a download failure) for an unusable wheel."""
    if not zipfile.is_zipfile(wheel):
        raise DownloadError(f"{wheel.name} is not a zip archive (truncated download?)", None, download_failed=False)
    with zipfile.ZipFile(wheel) as zf:
        bad = zf.testzip()
        if bad is not None:
            raise DownloadError(f"{wheel.name}: corrupt member {bad}", None, download_failed=False)
        keep = engine.wheel_members
        zf.extractall(dest, members=None if keep is None else [m for m in zf.namelist() if keep(m)])
        for member, copy in ((record_member(zf), RECORD), (dist_info_member(zf, "METADATA"), METADATA)):
            if member is not None:
                (dest / copy).write_bytes(zf.read(member))
    if not (dest / engine.package).is_dir():
        raise DownloadError(f"{wheel.name} holds no {engine.package}/ package", None, download_failed=False)


class IndexUnreadable(DownloadError):
    """The package index could not be listed: pip's exit status (None: it timed out) and output kept, so a caller
    that words the refusal its own way (``versions``) reads the same run."""

    def __init__(self, distribution: str, rc: int | None, stdout: str, stderr: str) -> None:
        last = [ln.strip() for ln in (stderr + stdout).splitlines() if ln.strip()]
        if rc is None:
            message = f"pip index versions {distribution} timed out after {INDEX_TIMEOUT_S} s"
        else:
            message = f"pip index versions {distribution}: {last[-1] if last else rc}"
        super().__init__(message, None)
        self.rc, self.stdout, self.stderr = rc, stdout, stderr


INDEX_TIMEOUT_S = 300


def index_versions(
    distribution: str, *, capture: Callable[..., tuple[int | None, str, str]] | None = None
) -> list[str]:
    """Every release of ``distribution`` the package index lists (``pip index versions``, pip's own client and
    configured indexes), newest first; `IndexUnreadable` when the index cannot be read. The one place deferlab
    asks the index for a release list: the engines' (``versions``, through `reports.versions.matrix`) and the
    companions' (`impl.loader.companions`). ``capture``: how pip runs (default the loader's, `children.capture`)."""
    cmd = [sys.executable, "-m", "pip", "--no-input", "index", "versions", distribution, "--disable-pip-version-check"]
    rc, stdout, stderr = (capture or children.capture)(cmd, timeout=INDEX_TIMEOUT_S)
    match = re.search(r"^Available versions:\s*(.+)$", stdout or "", re.M)
    if rc != 0 or not match:
        raise IndexUnreadable(distribution, rc, stdout or "", stderr or "")
    return [v.strip() for v in match.group(1).split(",") if v.strip()]


def sweep(cache: Path, older_than_s: float = _STALE_TMP_S) -> None:
    """Remove ``.tmp-*`` folders an interrupted run left more than ``older_than_s`` ago."""
    now = time.time()
    for entry in cache.glob(".tmp-*"):
        try:
            if now - entry.stat().st_mtime > older_than_s:
                shutil.rmtree(entry, ignore_errors=True)
        except OSError:
            pass
