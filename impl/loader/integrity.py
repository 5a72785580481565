"""Is a cached release still what its wheel shipped? Checked on every load against the wheel's RECORD, and mended.

Why: a release folder is a copy on the user's disk, and a copy can lose or change a file (a cleaner, an edit,
a full disk). Loaded as it was, a missing module of the engine's own would become a stand-in and the report a
verdict about the engine ("fails on VLLM: StandInUsedError") that is only a fact about the cache. So `ensure`
compares the tree with the sha256 of every file its wheel's RECORD lists (those the engine unpacks: vLLM's
Python sources), and re-extracts what differs from the kept wheel, or fetches the release again where the
wheel is gone (never under ``DEFERLAB_OFFLINE=1``: then one line naming the damage). A tree that differs is
mended or refused, never loaded and judged.

Fast: hashing a tree costs 0.1-1 s (vLLM 0.33.0's 3,861 files, SGLang 0.5.23's 5,771), so a tree that
verified gets a stamp (``deferlab-verified.json``) whose fingerprint keys on every file's path, size, mtime,
ctime and inode (`KEY`; those of the RECORD copy and the metadata too); a load whose tree has that fingerprint
again (a walk and a stat per file, no read) hashes nothing. Why ctime and inode, not size and mtime alone: an
edit that keeps the size (``return True`` made ``return False``) with its mtime set back (``os.utime``, ``touch
-r``, ``cp -p``) kept the old key and loaded as verified; ctime cannot be set by a user (every write, chmod or
utime moves it to now) and a file replaced by a rename is another inode, so either edit changes the key. Where
the key differs, only the files whose own (size, mtime, ctime, inode) changed are hashed: the per-file keys of
the last verification are kept beside the stamp (``deferlab-verified-keys.json``), read only then, and trusted
only while the RECORD copy is the one they were checked against. A stamp of an older key (without ``key``)
verifies the tree in full once. What the stamp does not stop: someone with root who sets the clock back, or a
file system without stable inodes or ctimes (then every load re-hashes what changed: slower, never wrong);
``deferlab cache verify`` hashes every file whatever the stamp says. The stamp's mtime is when the release was
last used (``deferlab cache prune --older-than``).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import logging
import os
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from deferlab.impl.loader import wheels
from deferlab.impl.loader.engine import Engine

STAMP = "deferlab-verified.json"
KEYS = "deferlab-verified-keys.json"  # the per-file keys of the last verification (read only when the key differs)
KEY = "path size mtime_ns ctime_ns ino"  # what the fingerprint covers: a stamp of another key verifies in full
_LOG = logging.getLogger("deferlab.loader")
Files = dict[str, os.stat_result]
Record = dict[str, tuple[str, int]]


@dataclass
class Damage:
    """How a tree differs from its wheel's RECORD (paths relative to the release folder)."""

    missing: list[str] = field(default_factory=list)
    altered: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.missing or self.altered or self.extra)

    def describe(self, shown: int = 3) -> str:
        """``2 missing (vllm/a.py, vllm/b.py), 1 altered (vllm/c.py)``: at most ``shown`` paths of each kind."""
        parts = []
        for kind, paths in (("missing", self.missing), ("altered", self.altered), ("extra", self.extra)):
            if paths:
                more = f", {len(paths) - shown} more" if len(paths) > shown else ""
                parts.append(f"{len(paths)} {kind} ({', '.join(sorted(paths)[:shown])}{more})")
        return ", ".join(parts) or "none"


@dataclass(frozen=True)
class Ensured:
    """A release folder ready to load: ``downloaded`` now, and what was mended ("" when nothing)."""

    tree: Path
    downloaded: bool
    mended: str = ""


# --- what the tree holds and what it should hold --------------------------------------------------------------------
def _ours(rel: str) -> bool:
    """deferlab's own files in a release folder (not the wheel's): metadata, the kept wheel, temporary files."""
    top = rel.split("/", 1)[0]
    return top.startswith(("deferlab-", ".tmp-")) or top == wheels.WHEEL_DIR


def tree_files(tree: Path) -> Files:
    """Every file the wheel could have put in ``tree`` (relative posix path -> stat), ``__pycache__`` left out."""
    found: Files = {}
    stack = [(str(tree), "")]
    while stack:
        folder, rel = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            path = rel + entry.name
            if entry.name == "__pycache__" or (not rel and _ours(path)):
                continue
            if entry.is_dir(follow_symlinks=False):
                stack.append((entry.path, path + "/"))
            else:
                found[path] = entry.stat(follow_symlinks=False)
    return found


def file_key(st: os.stat_result) -> list[int]:
    """What says a file is the one that was hashed: size, mtime, ctime (no user sets it back) and inode."""
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _own_key(tree: Path, name: str) -> list[int] | None:
    try:
        return file_key((tree / name).stat())
    except OSError:
        return None


def fingerprint(tree: Path, files: Files) -> str:
    """The key of the stamp (`KEY`): every file's path, size, mtime, ctime and inode, and those of the RECORD
    copy and the metadata."""
    rows = sorted("\0".join(map(str, [rel, *file_key(st)])) + "\n" for rel, st in files.items())
    for name in (wheels.RECORD, wheels.META):
        key = _own_key(tree, name)
        rows.append("\0".join(map(str, [name, *key])) + "\n" if key else f"no {name}\n")
    return hashlib.blake2b("".join(rows).encode(), digest_size=20).hexdigest()


def expected(engine: Engine, record: Record) -> Record:
    """The RECORD rows of the files the engine unpacks (`Engine.wheel_members`)."""
    keep = engine.wheel_members
    return {path: row for path, row in record.items() if keep is None or keep(path)}


def record_of(tree: Path) -> Record | None:
    """The RECORD a tree is checked against: its ``deferlab-RECORD``, else its kept wheel's (copied in: trees
    fetched before the copy existed); None when neither is there (a wheel without RECORD)."""
    try:
        return wheels.read_record((tree / wheels.RECORD).read_text(encoding="utf-8"))
    except OSError:
        pass
    text = _wheel_record(wheels.kept_wheel(tree))
    if text is None:
        return None
    with contextlib.suppress(OSError):  # a read-only cache is checked all the same
        wheels.write_atomic(tree / wheels.RECORD, text)
    return wheels.read_record(text.decode("utf-8"))


def _wheel_record(wheel: Path | None) -> bytes | None:
    if wheel is None:
        return None
    try:
        with zipfile.ZipFile(wheel) as zf:
            member = wheels.record_member(zf)
            return zf.read(member) if member else None
    except (OSError, ValueError, zipfile.BadZipFile, KeyError):
        return None


def digest(data: bytes) -> str:
    """sha256 as a RECORD writes it (urlsafe base64, no padding)."""
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def compare(tree: Path, files: Files, want: Record, trusted: frozenset[str] = frozenset()) -> Damage:
    """Each wanted file present with its size and sha256 (not hashed again: ``trusted``, those whose key is the
    one they had when they last hashed clean, `trusted_files`), and nothing else there."""
    damage = Damage(extra=[rel for rel in files if rel not in want])
    for rel, (sha, size) in want.items():
        st = files.get(rel)
        if st is None:
            damage.missing.append(rel)
        elif (size >= 0 and st.st_size != size) or (
            sha and rel not in trusted and digest((tree / rel).read_bytes()) != sha
        ):
            damage.altered.append(rel)
    return damage


# --- the stamp ------------------------------------------------------------------------------------------------------
def stamped(tree: Path) -> str | None:
    """The fingerprint the tree had when it last verified (None: never, an unreadable stamp, or a stamp of
    another `KEY`: an older deferlab's, keyed on size and mtime alone)."""
    try:
        stamp = json.loads((tree / STAMP).read_text())
        return str(stamp["fingerprint"]) if stamp.get("key") == KEY else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def trusted_files(tree: Path, files: Files) -> frozenset[str]:
    """The files whose key (`file_key`) is the one they had when the tree last verified: those need no hashing.
    None while the RECORD copy is not the one they were checked against (or the keys are missing, unreadable
    or of another `KEY`)."""
    try:
        kept = json.loads((tree / KEYS).read_text())
        if kept.get("key") != KEY or kept.get("record") != _own_key(tree, wheels.RECORD):
            return frozenset()
        keys = kept["files"]
        return frozenset(rel for rel, st in files.items() if keys.get(rel) == file_key(st))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return frozenset()


def _stamp(tree: Path, files: Files, seconds: float, *, used: float | None = None) -> None:
    """Write the stamp and the per-file keys (the stamp's mtime ``used`` when given: a check that is not a load
    keeps when the release was last used)."""
    keys = {"key": KEY, "record": _own_key(tree, wheels.RECORD), "files": {r: file_key(st) for r, st in files.items()}}
    wheels.write_atomic(tree / KEYS, json.dumps(keys, separators=(",", ":")).encode())
    stamp = {
        "key": KEY,
        "fingerprint": fingerprint(tree, files),
        "files": len(files),
        "verified_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "seconds": round(seconds, 3),
    }
    wheels.write_atomic(tree / STAMP, json.dumps(stamp, indent=2).encode())
    if used is not None:
        os.utime(tree / STAMP, (used, used))


def last_used(tree: Path) -> float:
    """When the release was last loaded (the stamp's mtime; else when it was fetched)."""
    for name in (STAMP, wheels.META):
        try:
            return (tree / name).stat().st_mtime
        except OSError:
            continue
    return tree.stat().st_mtime


def status(engine: Engine, tree: Path, *, full: bool = False) -> tuple[str, str]:
    """("verified" | "damaged" | "unverifiable", detail): a stamp that still fits is trusted, any other tree is
    hashed (the files whose key changed; every file with ``full``, the stamp and the kept keys ignored). Nothing
    of the release is changed; deferlab's own files are written (the RECORD copy, and the stamp of a tree that
    hashed clean, keeping when it was last used)."""
    t0 = time.perf_counter()
    files = tree_files(tree)
    if not full and stamped(tree) == fingerprint(tree, files):
        return "verified", ""
    record = record_of(tree)
    if record is None:
        return "unverifiable", "no RECORD (neither deferlab-RECORD nor a kept wheel holding one)"
    damage = compare(tree, files, expected(engine, record), frozenset() if full else trusted_files(tree, files))
    if damage:
        return "damaged", damage.describe()
    with contextlib.suppress(OSError):
        _stamp(tree, files, time.perf_counter() - t0, used=last_used(tree))
    return "verified", ""


def mend(engine: Engine, tree: Path) -> str:
    """Mend a damaged release folder from its kept wheel, fetching nothing (what ``deferlab cache verify`` does):
    what was done, or "" when the kept wheel is gone or cannot mend it. When it was last used is kept."""
    wheel = wheels.kept_wheel(tree)
    used = last_used(tree)
    if wheel is None or not _from_wheel(engine, tree.name, tree, wheel):
        return ""
    with contextlib.suppress(OSError):
        os.utime(tree / STAMP, (used, used))
    return f"mended from its kept wheel {wheel.name}"


# --- on load --------------------------------------------------------------------------------------------------------
def ensure(
    engine: Engine, version: str, cache: Path | None = None, downloader: wheels.Downloader | None = None
) -> Ensured:
    """The release folder of ``version``, fetched if absent, verified against its RECORD, mended if it differs.

    `wheels.OfflineError` under ``DEFERLAB_OFFLINE=1`` when it would have to be fetched (not cached, or damaged
    with no usable wheel kept); `wheels.DownloadError` when a fresh wheel's files do not match its own RECORD.
    """
    cache = cache or wheels.cache_root(engine)
    tree = cache / version
    if not tree.is_dir():
        tree, _ = wheels.fetch(engine, version, cache, downloader)
        _verify_fresh(engine, tree)
        return Ensured(tree, True)
    t0 = time.perf_counter()
    files = tree_files(tree)
    if stamped(tree) == fingerprint(tree, files):
        with contextlib.suppress(OSError):  # a read-only cache still loads
            os.utime(tree / STAMP)  # last used
        return Ensured(tree, False)
    record = record_of(tree)
    if record is None and wheels.cached_tree(engine, version, cache) is not None:
        return Ensured(tree, False)  # a wheel without RECORD: nothing to check against; loads as before
    damage = Damage()
    if record is not None:
        damage = compare(tree, files, expected(engine, record), trusted_files(tree, files))
    for rel in ((f"{engine.package}/",) if record is None else ()) + (wheels.META,):
        if not (tree / rel).exists():
            damage.missing.append(rel)
    if not damage:
        _stamp(tree, files, time.perf_counter() - t0)
        return Ensured(tree, False)
    return _mend(engine, version, tree, damage, downloader)


def _verify_fresh(engine: Engine, tree: Path) -> None:
    """A tree just unpacked matches its wheel's RECORD (else the wheel is unusable); stamped."""
    t0 = time.perf_counter()
    record = record_of(tree)
    files = tree_files(tree)
    if record is not None:
        damage = compare(tree, files, expected(engine, record))
        if damage:
            wheels.remove_release(tree)
            raise wheels.DownloadError(
                f"{tree.name}: the wheel's files do not match its own RECORD ({damage.describe()})",
                None,
                download_failed=False,
            )
    _stamp(tree, files, time.perf_counter() - t0)


def _mend(engine: Engine, version: str, tree: Path, damage: Damage, downloader: wheels.Downloader | None) -> Ensured:
    """Re-extract what differs from the kept wheel; where that cannot be done, fetch the release again."""
    what = f"the cached tree {tree} differs from its wheel's RECORD ({damage.describe()})"
    wheel = wheels.kept_wheel(tree)
    if wheel is not None and _from_wheel(engine, version, tree, wheel):
        note = f"{engine.name} {version}: {what}; mended from its kept wheel {wheel.name}"
        _LOG.warning("deferlab: %s", note)
        return Ensured(tree, False, note)
    why = "its kept wheel is gone" if wheel is None else f"its kept wheel {wheel.name} does not match it either"
    if wheels.offline():
        raise wheels.refuse_offline(engine, version, f"is damaged ({what}; {why})", tree.parent)
    tree = wheels.replace(engine, version, tree.parent, downloader)
    _verify_fresh(engine, tree)
    note = f"{engine.name} {version}: {what}; {why}, so it was fetched again"
    _LOG.warning("deferlab: %s", note)
    return Ensured(tree, True, note)


def _from_wheel(engine: Engine, version: str, tree: Path, wheel: Path) -> bool:
    """Put back every file that differs, each byte-checked against RECORD, from ``wheel``; remove extra files.

    The wheel's own RECORD is the truth when it differs from the copy (a damaged copy) and the wheel is the one
    fetched (its sha256 as recorded). False when the wheel cannot mend the tree (then it is fetched again)."""
    text = _wheel_record(wheel)
    if text is None:
        return False
    meta = wheels.source_meta(tree)
    copy = tree / wheels.RECORD
    if not copy.is_file() or copy.read_bytes() != text:
        if meta.get("sha256") and wheels.sha256_file(wheel) != meta["sha256"]:
            return False
        wheels.write_atomic(copy, text)
    want = expected(engine, wheels.read_record(text.decode("utf-8")))
    damage = compare(tree, tree_files(tree), want)
    try:
        with zipfile.ZipFile(wheel) as zf:
            for rel in damage.missing + damage.altered:
                data = zf.read(rel)
                if want[rel][0] and digest(data) != want[rel][0]:
                    return False
                wheels.write_atomic(tree / rel, data)
    except (OSError, KeyError, zipfile.BadZipFile):
        return False
    for rel in damage.extra:
        (tree / rel).unlink(missing_ok=True)
    if not meta:
        wheels.write_meta(tree, version, wheel)
    t0 = time.perf_counter()
    files = tree_files(tree)
    if compare(tree, files, want):
        return False
    _stamp(tree, files, time.perf_counter() - t0)
    return True
