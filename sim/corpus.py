"""Real image sizes and modes from a corpus manifest (no pixels are read).

The simulator only needs geometry, the staged channel count (semantics
§3.1's has_alpha rule) and the encoded file size (the physical floor of any
payload). By default it reads the corpus that ships in the package
(`reference.oracle.corpus`, plus any ``DEFERLAB_CORPUS`` folders); a scenario may
name another folder, and a missing one is a `CorpusMissing` with the path,
never a crash deep inside a run.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from deferlab.reference.oracle import corpus as builtin_corpus

REPO_ROOT = Path(__file__).resolve().parents[1]


class CorpusMissing(FileNotFoundError):
    """The corpus directory or its MANIFEST.tsv is not there."""


@dataclass(frozen=True)
class CorpusSizes:
    """Column arrays, one row per manifest entry."""

    files: tuple[str, ...]
    modes: tuple[str, ...]
    width: np.ndarray
    height: np.ndarray
    channels: np.ndarray  # 4 if has_alpha (semantics §3.1) else 3
    encoded_bytes: np.ndarray  # file size on disk, -1 if the file is missing

    def __len__(self) -> int:
        return len(self.files)


def has_alpha(mode: str, has_alpha_band: bool, transparency_kind: str) -> bool:
    """semantics §3.1: ``mode != "RGB" and ("A" in bands or "transparency" in info)``."""
    return mode != "RGB" and (has_alpha_band or transparency_kind not in ("", "none"))


def resolve_corpus(path: str | Path) -> Path:
    """A scenario's corpus folder: absolute, or relative to the directory holding the ``sim`` package."""
    p = Path(path)
    return p if p.is_absolute() else (REPO_ROOT / p).resolve()


def load_corpus(path: str | Path | None = None) -> CorpusSizes:
    """The built-in corpus (``path`` None) or a folder's MANIFEST.tsv; `CorpusMissing` naming a missing one."""
    if path is None:
        rows = builtin_corpus.entries()
        files = tuple(e.name for e in rows)
        channels = np.array([4 if e.has_alpha else 3 for e in rows], dtype=np.int64)
        sizes = [e.path.stat().st_size if e.path.is_file() else -1 for e in rows]
        return CorpusSizes(
            files,
            tuple(e.mode for e in rows),
            np.array([e.width for e in rows], dtype=np.int64),
            np.array([e.height for e in rows], dtype=np.int64),
            channels,
            np.array(sizes, dtype=np.int64),
        )
    root = resolve_corpus(path)
    manifest = root / "MANIFEST.tsv"
    if not manifest.is_file():
        raise CorpusMissing(
            f"image corpus not found: {str(manifest)!r} does not exist; set workload.corpus_path "
            f"(relative to {str(REPO_ROOT)!r} or absolute) to a folder holding MANIFEST.tsv"
        )
    rows = list(csv.DictReader(manifest.read_text().splitlines(), delimiter="\t"))
    need = {"file", "mode", "width", "height", "has_alpha_band", "info_transparency_kind"}
    if rows and not need <= set(rows[0]):
        raise ValueError(f"{str(manifest)!r}: missing column(s) {sorted(need - set(rows[0]))}")
    if not rows:
        raise ValueError(f"{str(manifest)!r} lists no images")
    files = tuple(r["file"] for r in rows)
    modes = tuple(r["mode"] for r in rows)
    width = np.array([int(r["width"]) for r in rows], dtype=np.int64)
    height = np.array([int(r["height"]) for r in rows], dtype=np.int64)
    alpha = [has_alpha(r["mode"], r["has_alpha_band"].lower() == "true", r["info_transparency_kind"]) for r in rows]
    channels = np.where(np.array(alpha), 4, 3).astype(np.int64)
    sizes = [(root / f).stat().st_size if (root / f).is_file() else -1 for f in files]
    return CorpusSizes(files, modes, width, height, channels, np.array(sizes, dtype=np.int64))
