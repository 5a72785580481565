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
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

from deferlab.impl.loader.engine import Engine

Downloader = Callable[[str, Path], Path]

_STALE_TMP_S = 3600
_FROM_VERSIONS = re.compile(r"from versions:\s*([^)]*)\)")


class DownloadError(RuntimeError):
    """pip could not provide the wheel; ``versions`` is what the index listed (None when it was unreachable).

    ``download_failed`` is False when a wheel arrived but is unusable (not a zip, a corrupt member, no
    package folder): a finding about the wheel, where a failed download says nothing about it."""

    def __init__(self, message: str, versions: list[str] | None, *, download_failed: bool = True) -> None:
        super().__init__(message)
        self.versions = versions
        self.download_failed = download_failed


def deferlab_cache() -> Path:
    """deferlab's cache folder: ``$DEFERLAB_CACHE`` when set, else ``~/.cache/deferlab`` (wheels, checkouts,
    mutation references and strategy scans each keep a folder under it)."""
    base = os.environ.get("DEFERLAB_CACHE")
    return Path(base).expanduser() if base else Path.home() / ".cache" / "deferlab"


def cache_root(engine: Engine) -> Path:
    """``$DEFERLAB_CACHE/<name>`` when ``DEFERLAB_CACHE`` is set, else ``~/.cache/deferlab/<name>``."""
    return deferlab_cache() / engine.name


def cached_tree(engine: Engine, version: str, cache: Path | None = None) -> Path | None:
    """The complete unzipped tree of ``version`` if a previous run left one, else None."""
    final = (cache or cache_root(engine)) / version
    return final if (final / engine.package).is_dir() and (final / "deferlab-source.json").is_file() else None


def pip_downloader(engine: Engine) -> Downloader:
    """The default downloader of ``engine``: `pip_download` of its distribution."""
    return lambda version, dest: pip_download(engine.distribution, version, dest)


def pip_download(distribution: str, version: str, dest: Path) -> Path:
    """``python -m pip download --no-deps DISTRIBUTION==VERSION`` into ``dest``; the wheel's path."""
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
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
    except subprocess.TimeoutExpired:
        raise DownloadError(f"pip download {distribution}=={version} timed out after 900 s", None) from None
    wheels = sorted(dest.glob(f"{re.sub(r'[-_.]+', '_', distribution)}-*.whl"))
    if proc.returncode == 0 and wheels:
        return wheels[0]
    text = proc.stderr + proc.stdout
    match = _FROM_VERSIONS.search(text)
    versions = None
    if match and match.group(1).strip() not in ("", "none"):
        versions = [v.strip() for v in match.group(1).split(",") if v.strip()]
    last = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("WARNING: Location")]
    raise DownloadError(last[-1] if last else f"pip exited {proc.returncode}", versions)


def fetch(
    engine: Engine, version: str, cache: Path | None = None, downloader: Downloader | None = None
) -> tuple[Path, bool]:
    """(tree, downloaded_now): the unzipped wheel of ``version``, fetching it only if not cached."""
    cache = cache or cache_root(engine)
    found = cached_tree(engine, version, cache)
    if found is not None:
        return found, False
    cache.mkdir(parents=True, exist_ok=True)
    _sweep_stale(cache)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{version}-", dir=cache))
    try:
        wheel = (downloader or pip_downloader(engine))(version, tmp / "wheel")
        if not zipfile.is_zipfile(wheel):
            raise DownloadError(f"{wheel.name} is not a zip archive (truncated download?)", None, download_failed=False)
        with zipfile.ZipFile(wheel) as zf:
            bad = zf.testzip()
            if bad is not None:
                raise DownloadError(f"{wheel.name}: corrupt member {bad}", None, download_failed=False)
            keep = engine.wheel_members
            zf.extractall(tmp, members=None if keep is None else [m for m in zf.namelist() if keep(m)])
        if not (tmp / engine.package).is_dir():
            raise DownloadError(f"{wheel.name} holds no {engine.package}/ package", None, download_failed=False)
        meta = {
            "version": version,
            "wheel": wheel.name,
            "sha256": _sha256(wheel),
            "fetched_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        (tmp / "deferlab-source.json").write_text(json.dumps(meta, indent=2))
        os.chmod(tmp, 0o755)  # mkdtemp made it private; the finished tree is an ordinary readable folder
        final = cache / version
        try:
            os.rename(tmp, final)
        except OSError:
            if cached_tree(engine, version, cache) is None:  # not a concurrent winner: a real failure
                raise
            shutil.rmtree(tmp, ignore_errors=True)
        return final, True
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def source_meta(tree: Path) -> dict[str, str]:
    """What ``fetch`` recorded about a cached tree (version, wheel, sha256, fetched_at)."""
    try:
        return json.loads((tree / "deferlab-source.json").read_text())
    except (OSError, ValueError):
        return {}


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _sweep_stale(cache: Path) -> None:
    """Remove ``.tmp-*`` folders an interrupted run left more than an hour ago."""
    now = time.time()
    for entry in cache.glob(".tmp-*"):
        try:
            if now - entry.stat().st_mtime > _STALE_TMP_S:
                shutil.rmtree(entry, ignore_errors=True)
        except OSError:
            pass
