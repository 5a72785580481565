"""Property 9: every image of the real-image corpus through properties 1, 2 and 6.

The corpus (``../shared/corpus`` from the repo root, or ``$DEFERLAB_CORPUS``)
holds 70 files other projects committed: odd modes, transparency in every
form, 1x1 to 800x600. Each file is checked against ``MANIFEST.tsv`` first
(sha256, format, mode, size, transparency kind, alpha band, frame count,
recorded with Pillow 13.0.0); a mismatch fails with the field, the manifest
value and what was found, rather than silently skipping the file. Then its
first frame goes through the stage-by-stage equivalence (1), eager ==
deferred (2, against another corpus image as request companion) and the
alpha semantics (6).
"""

from __future__ import annotations

import csv
import hashlib
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from test_prop_eager_deferred import check_eager_equals_deferred
from test_prop_equivalence import check_stages
from test_prop_modes import check_alpha_semantics

from reference.config import BackgroundConfig, PreprocessConfig

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("DEFERLAB_CORPUS", ROOT.parent / "shared" / "corpus"))
BG = BackgroundConfig(pattern="chessboard", square_size=8, gray_value=180)
# Limits that resize every corpus image (a 56 x 56-ish budget), so the resize stage is really exercised.
RESIZING = PreprocessConfig(
    patch_size=14, merge_kernel_size=2, in_patch_limit=16, patch_limit_on_one_side=8, background=BG
)


def manifest_rows() -> list[dict[str, str]]:
    path = CORPUS / "MANIFEST.tsv"
    if not path.is_file():
        return []
    with path.open(newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


ROWS = manifest_rows()


def transparency_kind(image: Image.Image) -> str:
    value = image.info.get("transparency")
    if value is None:
        return "none"
    return {int: "int", tuple: "tuple", bytes: "bytes-alpha-table"}.get(type(value), type(value).__name__)


def open_checked(row: dict[str, str]) -> Image.Image:
    """Open a corpus file after checking its bytes and what Pillow reports against the manifest."""
    path = CORPUS / row["file"]
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    assert digest == row["sha256"], f"{row['file']}: sha256 {digest} != manifest {row['sha256']}"
    image = Image.open(path)
    found = {
        "format": image.format,
        "mode": image.mode,
        "width": str(image.size[0]),
        "height": str(image.size[1]),
        "info_transparency_kind": transparency_kind(image),
        "has_alpha_band": str("A" in image.getbands()).lower(),
        "n_frames": str(getattr(image, "n_frames", 1)),
    }
    wrong = {k: (row[k], v) for k, v in found.items() if row[k] != v}
    assert not wrong, f"{row['file']} differs from MANIFEST.tsv (manifest, found): {wrong}; Pillow {Image.__version__}"
    image.load()
    return image


def test_corpus_is_present():
    """The corpus and its manifest are where the suite looks (set DEFERLAB_CORPUS to move it)."""
    assert ROWS, f"no MANIFEST.tsv rows under {CORPUS}; set DEFERLAB_CORPUS to the corpus folder"
    assert len(ROWS) == len({r["file"] for r in ROWS}), "duplicate files in MANIFEST.tsv"


@pytest.mark.parametrize("row", ROWS, ids=[r["file"].removeprefix("images/") for r in ROWS])
def test_corpus_image_through_properties_1_2_6(impl, row):
    """The file matches its manifest, and its first frame passes properties 1, 2 and 6."""
    image = open_checked(row)
    check_stages(impl, RESIZING, image)
    companion = Image.frombytes("RGBA", (3, 2), bytes(range(0, 240, 10)))
    for policy in ("PR_33921", "RELEASED"):
        check_eager_equals_deferred(impl, policy, RESIZING, [image, companion], [[1], [0]], "cpu")
    check_alpha_semantics(impl, "RELEASED", image, BG)
    assert np.asarray(image).size > 0
