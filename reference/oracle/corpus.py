"""The real-image corpus that ships inside the package, plus any folders named in ``DEFERLAB_CORPUS``.

Why here: the oracle's tests, ``impl``'s tests and the simulator all read the
same files, and the installed suite must find them without a source
checkout. Each folder holds a ``MANIFEST.tsv`` (file, sha256, format, mode,
size, transparency kind, alpha band, frame count, licence, source; see
``reference/data/corpus/README.md``). ``DEFERLAB_CORPUS`` may add folders
(separated by ``os.pathsep``), each with its own manifest in the same
format; it never replaces the built-in corpus. Opening a file checks its
bytes and what Pillow reports against the manifest first, so a changed file
or another Pillow's reading fails loudly instead of silently testing
something else.
"""

from __future__ import annotations

import csv
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from deferlab.reference.system.errors import CorpusError

BUILTIN = Path(__file__).resolve().parents[1] / "data" / "corpus"
ENV_VAR = "DEFERLAB_CORPUS"
COLUMNS = (
    "file",
    "sha256",
    "format",
    "mode",
    "width",
    "height",
    "info_transparency_kind",
    "has_alpha_band",
    "n_frames",
    "licence_note",
    "source_path",
)


@dataclass(frozen=True)
class CorpusEntry:
    """One manifest row; ``root`` is the folder holding the manifest."""

    root: Path
    file: str
    sha256: str
    format: str
    mode: str
    width: int
    height: int
    transparency_kind: str
    has_alpha_band: bool
    n_frames: int
    licence: str
    source: str

    @property
    def path(self) -> Path:
        return self.root / self.file

    @property
    def name(self) -> str:
        return Path(self.file).name

    @property
    def has_alpha(self) -> bool:
        """Semantics §3.1: not RGB, and an alpha band or a ``transparency`` key."""
        return self.mode != "RGB" and (self.has_alpha_band or self.transparency_kind != "none")


def folders() -> list[Path]:
    """The built-in corpus, then every folder ``DEFERLAB_CORPUS`` names (each must hold a MANIFEST.tsv)."""
    extra = [Path(p) for p in os.environ.get(ENV_VAR, "").split(os.pathsep) if p.strip()]
    for p in extra:
        if not (p / "MANIFEST.tsv").is_file():
            raise CorpusError(
                f"{ENV_VAR} names {str(p)!r}, which holds no MANIFEST.tsv; "
                f"accepted: folders with a manifest in the built-in corpus's format (columns {', '.join(COLUMNS)})"
            )
    return [BUILTIN, *extra]


def read_manifest(root: Path) -> list[CorpusEntry]:
    """The rows of ``root/MANIFEST.tsv``; `CorpusError` naming the file for a missing one or a bad column."""
    manifest = Path(root) / "MANIFEST.tsv"
    if not manifest.is_file():
        raise CorpusError(f"no corpus manifest at {str(manifest)!r}")
    with manifest.open(newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    if not rows:
        raise CorpusError(f"{str(manifest)!r} lists no images")
    missing = [c for c in COLUMNS if c not in rows[0]]
    if missing:
        raise CorpusError(f"{str(manifest)!r} lacks column(s) {missing}; expected {', '.join(COLUMNS)}")
    out = []
    for n, r in enumerate(rows, start=2):
        try:
            out.append(
                CorpusEntry(
                    root=Path(root),
                    file=r["file"],
                    sha256=r["sha256"],
                    format=r["format"],
                    mode=r["mode"],
                    width=int(r["width"]),
                    height=int(r["height"]),
                    transparency_kind=r["info_transparency_kind"] or "none",
                    has_alpha_band=r["has_alpha_band"].strip().lower() == "true",
                    n_frames=int(r["n_frames"]),
                    licence=r["licence_note"],
                    source=r["source_path"],
                )
            )
        except ValueError as e:
            raise CorpusError(f"{str(manifest)!r} line {n}: {e}") from None
    return out


def entries() -> list[CorpusEntry]:
    """Every manifest row of every corpus folder, built-in first."""
    return [e for root in folders() for e in read_manifest(root)]


def transparency_kind(image: Image.Image) -> str:
    """How ``info['transparency']`` is stored: none, int, tuple or bytes-alpha-table (the manifest's words)."""
    value = image.info.get("transparency")
    if value is None:
        return "none"
    return {int: "int", tuple: "tuple", bytes: "bytes-alpha-table"}.get(type(value), type(value).__name__)


def open_checked(entry: CorpusEntry) -> Image.Image:
    """The decoded first frame, after checking the file's sha256 and what Pillow reports against the manifest."""
    data = entry.path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != entry.sha256:
        raise CorpusError(f"{entry.file}: sha256 {digest} != manifest {entry.sha256}")
    image = Image.open(entry.path)
    found = {
        "format": (image.format, entry.format),
        "mode": (image.mode, entry.mode),
        "size": (image.size, (entry.width, entry.height)),
        "transparency kind": (transparency_kind(image), entry.transparency_kind),
        "alpha band": ("A" in image.getbands(), entry.has_alpha_band),
        "frames": (getattr(image, "n_frames", 1), entry.n_frames),
    }
    wrong = {k: {"found": v, "manifest": m} for k, (v, m) in found.items() if v != m}
    if wrong:
        raise CorpusError(f"{entry.file} differs from its manifest: {wrong} (Pillow {Image.__version__})")
    image.load()
    return image


def by_name(name: str) -> CorpusEntry:
    """The entry whose file name is ``name`` (KeyError listing nothing but the miss: the corpus is large)."""
    for e in entries():
        if e.name == name:
            return e
    raise KeyError(f"no corpus image named {name!r}")
