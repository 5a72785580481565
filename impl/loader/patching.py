"""``--patch FILE``: run an engine's release (or checkout) with a unified diff applied, to verify a fix.

Why a copy: a fix proposed upstream (a pull request's diff, or one's own) is checked by running the claims on the
release with the diff applied. The cached release is never touched (its integrity stamp, `integrity`, must still
verify afterwards, and every other run reads it): the tree is copied into this process's temporary place (under a
deferlab command, its run folder: the children's ``TMPDIR``, removed with the command), the diff applied to the copy
with ``patch --dry-run`` first, and the copy loaded. The source's name says so (``sglang-0.5.23+patch.<sha8>``) and
its provenance names the file and its sha256 (`provenance.describe`).

How a load asks for it: ``DEFERLAB_PATCH=FILE`` (`PATCH_ENV`: every load of the engine whose package the diff
names, in this process and its children; what ``deferlab report`` and ``versions`` set), or a spec ending in
``+patch:FILE`` (`MARK`: that spec alone; ``deferlab compare`` gives it to HEAD only). Bad input is one line each,
before anything is imported: a file that is not a unified diff, a diff naming a path this tree lacks (a diff of
another release), a hunk that does not apply (the file and the hunk named). Semantics §18.9 (the InternVL tie
fix this verifies), docs/reviewing.md "Verify a fix".
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deferlab.impl.loader import children, owned
from deferlab.impl.loader.engine import Engine
from deferlab.reference.system.engines import engine as registered
from deferlab.reference.system.errors import InputValueError, UsageError

PATCH_ENV = "DEFERLAB_PATCH"
MARK = "+patch:"
NAME_MARK = "+patch."  # a patched source's code name: ``sglang-0.5.23+patch.<sha8>`` (`sources.Source.name`)
ACCEPTED = "accepted: a unified diff (git diff, diff -u) of text files of an engine's tree, each path one folder "
ACCEPTED += "above the package or its checkout folder (a/sglang/... or a/python/sglang/...)"
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_FAILED = re.compile(r"Hunk #(\d+) FAILED at (\d+)")
_MADE: dict[tuple[str, str], Path] = {}  # (tree, sha256) -> its patched copy, one per process


class PatchError(InputValueError):
    """A patch file that cannot be used (the message names the file, what is wrong and what is accepted)."""


@dataclass(frozen=True)
class FilePatch:
    """One file of a diff: its path after the first folder (``a/``) is dropped, whether it is new, its hunks'
    first old lines."""

    path: str
    new: bool
    hunks: tuple[int, ...]


@dataclass(frozen=True)
class Diff:
    """A unified diff read and checked: where it is, its sha256, and its files."""

    path: Path
    sha256: str
    files: tuple[FilePatch, ...]

    @property
    def sha8(self) -> str:
        return self.sha256[:8]

    def describe(self) -> dict[str, Any]:
        """What provenance records: the file's name and path, its sha256, the files it changes."""
        return {"file": self.path.name, "path": str(self.path), "sha256": self.sha256,
                "files": [f.path for f in self.files]}  # fmt: skip


def read(path: str | Path) -> Diff:
    """``path`` read as a unified diff (`PatchError` in one line when it is none: no file, not text, no hunk, a
    hunk whose line counts do not add up, a binary patch)."""
    path = Path(path).expanduser().resolve()
    name = f"patch {str(path)!r}"
    try:
        data = path.read_bytes()
    except OSError as e:
        raise PatchError(f"{name}: cannot be read ({e.strerror or type(e).__name__}); {ACCEPTED}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise PatchError(f"{name}: not UTF-8 text, so not a unified diff; {ACCEPTED}") from None
    files = _parse(name, text.splitlines())
    return Diff(path, hashlib.sha256(data).hexdigest(), files)


def _strip(name: str, header: str) -> str | None:
    """The path of a ``---``/``+++`` line with its first folder dropped (``patch -p1``); None for /dev/null."""
    raw = header[4:].split("\t")[0].strip()
    if raw == "/dev/null":
        return None
    parts = raw.split("/", 1)
    if len(parts) < 2 or not parts[1] or ".." in parts[1].split("/"):
        raise PatchError(f"{name}: file name {raw!r} has no first folder to drop (patch -p1); {ACCEPTED}")
    return parts[1]


def _parse(name: str, lines: list[str]) -> tuple[FilePatch, ...]:
    files: list[FilePatch] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("GIT binary patch") or line.startswith("Binary files "):
            raise PatchError(f"{name}: a binary patch (line {i + 1}); {ACCEPTED}")
        if not (line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ ")):
            i += 1
            continue
        start, old, new = i + 1, _strip(name, line), _strip(name, lines[i + 1])
        target = new or old
        if target is None:
            raise PatchError(f"{name}: line {i + 1} patches /dev/null into /dev/null; {ACCEPTED}")
        i += 2
        hunks: list[int] = []
        while i < len(lines) and (m := _HUNK.match(lines[i])):
            at = i + 1
            want_old = int(m.group(2) if m.group(2) is not None else 1)
            want_new = int(m.group(4) if m.group(4) is not None else 1)
            i += 1
            got_old = got_new = 0
            while i < len(lines) and (got_old < want_old or got_new < want_new):
                tag = lines[i][:1]
                if tag not in (" ", "-", "+", "\\", ""):
                    break
                got_old += tag in (" ", "-", "")
                got_new += tag in (" ", "+", "")
                i += 1
            while i < len(lines) and lines[i].startswith("\\"):
                i += 1
            if (got_old, got_new) != (want_old, want_new):
                raise PatchError(
                    f"{name}: hunk #{len(hunks) + 1} of {target} (line {at}) is cut short: {got_old}/{want_old} old "
                    f"and {got_new}/{want_new} new lines; {ACCEPTED}"
                )
            hunks.append(int(m.group(1)))
        if not hunks:
            raise PatchError(f"{name}: {target} (line {start}) has no hunk ('@@ -L,N +L,N @@'); {ACCEPTED}")
        files.append(FilePatch(target, old is None, tuple(hunks)))
    if not files:
        raise PatchError(f"{name}: not a unified diff (no '--- a/PATH', '+++ b/PATH' and '@@' hunk); {ACCEPTED}")
    return tuple(files)


def level(engine: Engine, diff: Diff) -> int | None:
    """``patch``'s ``-p`` for ``engine``'s tree (1: paths start at its package, ``sglang/...``; 2: at the
    checkout's folder, ``python/sglang/...``), or None when a path of the diff is outside its package."""
    pkg, sub = engine.package, engine.checkout_subdir
    for strip, prefix in ((1, f"{pkg}/"), (2, f"{sub}/{pkg}/" if sub else None)):
        if prefix and all(f.path.startswith(prefix) for f in diff.files):
            return strip
    return None


def wanted(engine: Engine, spec: str) -> tuple[str, Diff | None]:
    """(the spec without ``+patch:FILE``, the diff a load of ``engine`` at ``spec`` applies, or None): the spec's
    own mark first, else `PATCH_ENV` when its diff names ``engine``'s package (a diff of another engine is not
    this load's)."""
    if MARK in spec:
        base, _, file = spec.rpartition(MARK)
        return base, _read_for(engine, spec, file)
    file = os.environ.get(PATCH_ENV, "").strip()
    if not file:
        return spec, None
    diff = _read_for(engine, spec, file)
    return spec, diff if level(engine, diff) is not None else None


def _read_for(engine: Engine, spec: str, file: str) -> Diff:
    try:
        return read(file)
    except PatchError as e:
        raise engine.source_error(f"{engine.name} source {spec!r}: {e}") from None


def apply(engine: Engine, spec: str, found: Any, diff: Diff) -> Any:
    """``found`` (a `sources.Resolved`) with its root replaced by a patched copy of it (one per process and
    diff) and ``patch`` set to the diff's description; the engine's source error in one line when the diff is
    another engine's or release's, or a hunk does not apply. The cached tree is only read."""
    where = f"{engine.name} {found.version} ({found.root})"
    label = f"patch {diff.path.name!r}"
    if found.kind == "installed":
        raise engine.source_error(f"{engine.name} source {spec!r}: {label} applies to a copy of a release or a "
                                  "checkout, not to the installed package; accepted: a release or a checkout path")  # fmt: skip
    strip = level(engine, diff)
    if strip is None:
        outside = next(f.path for f in diff.files if not f.path.startswith(f"{engine.package}/"))
        raise engine.source_error(f"{engine.name} source {spec!r}: {label} changes {outside}, outside {engine.name}'s "
                                  f"package; accepted: a diff of files under {_folders(engine)}")  # fmt: skip
    rel = [f.path.split("/", strip - 1)[-1] for f in diff.files]
    absent = [r for r, f in zip(rel, diff.files, strict=True) if not f.new and not (found.root / r).is_file()]
    if absent:
        raise engine.source_error(
            f"{engine.name} source {spec!r}: {label} changes {absent[0]}, which {where} does not have (a diff of "
            "another release?); accepted: a diff of files this tree has"
        )
    key = (str(found.root), diff.sha256)
    copy = _MADE.get(key)
    if copy is None:
        copy = _copy(engine, found.root, f"{engine.name}-{found.version}-{diff.sha8}")
        for dry in (True, False):
            _run_patch(engine, spec, label, where, copy, diff, strip, dry)
        _MADE[key] = copy
    return dataclasses.replace(found, root=copy, patch={**diff.describe(), "tree": str(found.root)})


COPY_PREFIX = "deferlab-patched-"


def _copy(engine: Engine, root: Path, name: str) -> Path:
    """A copy of ``root`` (the folder holding the package; a release's kept wheel and stamp left out) in this
    process's temporary place, removed when this process ends (`owned.make`: a copy whose process ended without
    removing it is swept by the next)."""
    top = owned.make(f"{COPY_PREFIX}{name}-")

    def ignore(folder: str, names: list[str]) -> set[str]:
        skip = {n for n in names if n in ("__pycache__", ".git")}
        if Path(folder) == root:
            skip |= {n for n in names if n == "wheel" or n.startswith("deferlab-verified")}
        return skip

    shutil.copytree(root, top / "tree", ignore=ignore, symlinks=True)
    return top / "tree"


def _run_patch(
    engine: Engine, spec: str, label: str, where: str, tree: Path, diff: Diff, strip: int, dry: bool
) -> None:
    """``patch`` into the copy (``--dry-run`` first: a failing diff changes nothing); no fuzz, no reversed
    guess, no backup or reject files. A failure is one line naming the file and the hunk."""
    exe = shutil.which("patch")
    if exe is None:
        raise engine.source_error(f"{engine.name} source {spec!r}: {label} needs the patch program, not found on "
                                  "PATH; accepted: install patch (GNU patch)")  # fmt: skip
    cmd = [exe, f"-p{strip}", "--forward", "--batch", "--fuzz=0", "--no-backup-if-mismatch", "-r", "-"]
    cmd += ["-d", str(tree), "-i", str(diff.path)]
    cmd = [*cmd, "--dry-run"] if dry else cmd
    rc, out, err = children.capture(cmd, 120)
    if rc == 0:
        return
    text = out + "\n" + err
    current = ""
    for line in text.splitlines():
        if line.startswith(("patching file ", "checking file ")):
            current = line.split(" file ", 1)[1].strip().strip("'")
        if "Reversed (or previously applied)" in line:
            raise engine.source_error(f"{engine.name} source {spec!r}: {label}: {current} in {where} has it already "
                                      "(applied before, or the diff is reversed); accepted: a diff of this tree's code")  # fmt: skip
        failed = _FAILED.search(line)
        if failed:
            raise engine.source_error(
                f"{engine.name} source {spec!r}: {label}: hunk #{failed.group(1)} of {current} (at line "
                f"{failed.group(2)}) does not apply to {where}; accepted: a diff of this tree's code"
            )
    last = (text.strip().splitlines() or [f"exit {rc}"])[-1]
    raise engine.source_error(f"{engine.name} source {spec!r}: {label} does not apply to {where}: {last}; {ACCEPTED}")


def _folders(engine: Engine) -> str:
    sub = f" or {engine.checkout_subdir}/{engine.package}/" if engine.checkout_subdir else ""
    return f"{engine.package}/{sub}"


def check_command(file: str, engines: list[str], cluster: str | None = None, flag: str = "--patch") -> Diff:
    """A command's ``--patch FILE`` at its front door (`UsageError`, one line): the file is a unified diff, of the
    package of one of ``engines`` (the engines the command loads, registry names), and the runs are on this machine
    (a cluster's worker has no such file). Whether it applies is known once the tree is fetched: the command's load
    check applies it (``--dry-run`` first) and refuses in one line."""
    if cluster not in (None, "local"):
        raise UsageError(f"{flag} {file}: not with --cluster {cluster} (a worker has no such file); accepted: "
                         "--cluster local, or no --cluster")  # fmt: skip
    try:
        diff = read(file)
    except PatchError as e:
        raise UsageError(f"{flag}: {e}") from None
    described = [importlib.import_module(registered(name).sources).ENGINE for name in engines]
    if not any(level(e, diff) is not None for e in described):
        folders = " or ".join(_folders(e) for e in described) or "no engine: name one"
        raise UsageError(f"{flag}: patch {str(diff.path)!r} changes {diff.files[0].path}, outside the package of "
                         f"{' and '.join(engines) or 'any engine this run loads'}; accepted: a diff of files under "
                         f"{folders}")  # fmt: skip
    return diff
