"""What a release folder holds beside the engine's tree, read and written: the files that vouch for the tree.

Why a module of its own: `wheels` fetches and unpacks a release; these files are read long after, by whoever
checks or uses the tree (`integrity` mends it against the RECORD, `importer` asks which modules the wheel
ships, `companions` reads the versions the METADATA accepts, `cache` lists what is kept). A release folder
holds ``deferlab-source.json`` (`source_meta`: the wheel's name, sha256, where pip got it, when), the wheel
itself under ``wheel/`` (kept, so a damaged tree is mended without the network), ``deferlab-RECORD`` (the
wheel's own RECORD, verbatim: the sha256 of every file it ships, and which of the engine's modules are
compiled) and ``deferlab-METADATA`` (the wheel's METADATA, verbatim). `wheels` re-exports these names.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import json
import os
import tempfile
import time
import zipfile
from pathlib import Path

META = "deferlab-source.json"
RECORD = "deferlab-RECORD"  # the wheel's RECORD, verbatim
METADATA = "deferlab-METADATA"  # the wheel's METADATA, verbatim (its Requires-Dist: `impl.loader.companions`)
WHEEL_DIR = "wheel"  # the kept wheel, beside the tree it was unpacked into


def record_member(zf: zipfile.ZipFile) -> str | None:
    """The name of the wheel's ``<name>-<version>.dist-info/RECORD`` (None for a wheel without one)."""
    return dist_info_member(zf, "RECORD")


def dist_info_member(zf: zipfile.ZipFile, name: str) -> str | None:
    """The name of the wheel's ``<name>-<version>.dist-info/<name>`` (None for a wheel without one)."""
    return next((n for n in zf.namelist() if n.count("/") == 1 and n.endswith(f".dist-info/{name}")), None)


def metadata_text(tree: Path) -> str | None:
    """The wheel's METADATA of a release folder: its ``deferlab-METADATA``, else read from its kept wheel and
    copied in (trees fetched before the copy was kept); None when neither has one (a checkout, no wheel)."""
    try:
        return (tree / METADATA).read_text(encoding="utf-8")
    except OSError:
        pass
    wheel = kept_wheel(tree)
    if wheel is None:
        return None
    try:
        with zipfile.ZipFile(wheel) as zf:
            member = dist_info_member(zf, "METADATA")
            data = zf.read(member) if member else None
    except (OSError, ValueError, KeyError, zipfile.BadZipFile):
        return None
    if data is None:
        return None
    with contextlib.suppress(OSError):  # a read-only cache is read all the same
        write_atomic(tree / METADATA, data)
    return data.decode("utf-8", errors="replace")


def read_record(text: str) -> dict[str, tuple[str, int]]:
    """A RECORD's rows: path -> (sha256 as urlsafe base64 without padding, size); ("", -1) where the row gives
    none (RECORD itself). Rows of another algorithm are kept without a digest; paths leaving the tree dropped."""
    rows: dict[str, tuple[str, int]] = {}
    for row in csv.reader(text.splitlines()):
        if not row or not row[0] or row[0].startswith("/") or ".." in row[0].split("/"):
            continue
        algo, _, digest = (row[1] if len(row) > 1 else "").partition("=")
        size = row[2] if len(row) > 2 and row[2].isdigit() else "-1"
        rows[row[0]] = (digest if algo == "sha256" else "", int(size))
    return rows


def shipped_modules(tree: Path) -> dict[str, tuple[str, str]]:
    """Module name -> ("python" | "compiled", its path in the wheel), for every module the RECORD copy in ``tree``
    lists ({} without one): what the importer may never stand in for, and what it may (compiled modules)."""
    try:
        paths = read_record((tree / RECORD).read_text(encoding="utf-8"))
    except OSError:
        return {}
    modules: dict[str, tuple[str, str]] = {}
    for path in paths:
        folder, _, name = path.rpartition("/")
        stem, _, suffix = name.partition(".")
        kind = "python" if suffix == "py" else "compiled" if suffix.rpartition(".")[2] in ("so", "pyd") else ""
        if kind and stem:
            module = folder if (stem, kind) == ("__init__", "python") else f"{folder}/{stem}".strip("/")
            modules.setdefault(module.replace("/", "."), (kind, path))
    return modules


def write_meta(tree: Path, version: str, wheel: Path, origin: dict[str, str] | None = None) -> None:
    """``tree/deferlab-source.json``: the wheel's name, sha256 and origin, and when it was fetched."""
    meta = {
        "version": version,
        "wheel": wheel.name,
        "sha256": sha256_file(wheel),
        "fetched_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(wheel.stat().st_mtime)),
        **(origin or {}),
    }
    write_atomic(tree / META, json.dumps(meta, indent=2).encode())


def kept_wheel(tree: Path) -> Path | None:
    """The wheel a release folder was unpacked from, kept under ``wheel/`` (None when it is gone)."""
    named = source_meta(tree).get("wheel")
    if named and (tree / WHEEL_DIR / named).is_file():
        return tree / WHEEL_DIR / named
    found = sorted((tree / WHEEL_DIR).glob("*.whl"))
    return found[0] if len(found) == 1 else None


def source_meta(tree: Path) -> dict[str, str]:
    """What ``fetch`` recorded about a cached tree (version, wheel, sha256, fetched_at, index, url)."""
    try:
        return json.loads((tree / META).read_text())
    except (OSError, ValueError):
        return {}


def write_atomic(path: Path, data: bytes, *, mode: int | None = 0o644) -> None:
    """``data`` at ``path`` through a temporary sibling renamed over it (a reader sees the old or the new; two
    processes writing one path leave one whole file). ``mode`` None keeps mkstemp's 0600 (a private cache entry:
    `bytecode`, `properties.clips`). The sibling's name starts ``.tmp-`` (`bytecode.entries` counts a leftover)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".tmp-{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def sha256_file(path: Path) -> str:
    """The hex sha256 of a file, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
