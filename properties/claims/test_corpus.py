"""Property 9: every image of the real-image corpus through properties 1, 2 and 6.

The corpus (``reference/data/corpus``, shipped with the package, plus any
``$DEFERLAB_CORPUS`` folders) holds 68 files other projects committed: odd modes, transparency in every
form, 1x1 to 800x600. Each file is checked against ``MANIFEST.tsv`` first
(sha256, format, mode, size, transparency kind, alpha band, frame count,
recorded with Pillow 13.0.0); a mismatch fails with the field, the manifest
value and what was found, rather than silently skipping the file. Then its
first frame goes through the stage-by-stage equivalence (1), eager ==
deferred (2, against another corpus image as request companion) and the
alpha semantics (6).
"""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from deferlab.properties.claims.test_eager_deferred import check_eager_equals_deferred
from deferlab.properties.claims.test_equivalence import check_stages
from deferlab.properties.claims.test_modes import check_alpha_semantics
from deferlab.reference.oracle import corpus
from deferlab.reference.system.config import BackgroundConfig, PreprocessConfig

BG = BackgroundConfig(pattern="chessboard", square_size=8, gray_value=180)
# Limits that resize every corpus image (a 56 x 56-ish budget), so the resize stage is really exercised.
RESIZING = PreprocessConfig(
    patch_size=14, merge_kernel_size=2, in_patch_limit=16, patch_limit_on_one_side=8, background=BG
)
ENTRIES = corpus.entries()


def test_corpus_is_present():
    """The built-in corpus (and any DEFERLAB_CORPUS folders) list images, each file once."""
    assert len(ENTRIES) >= 68, f"only {len(ENTRIES)} corpus images under {corpus.BUILTIN}"
    paths = [e.path for e in ENTRIES]
    assert len(paths) == len(set(paths)), "a file is listed twice"


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_corpus_image_through_properties_1_2_6(impl, entry):
    """The file matches its manifest, and its first frame passes properties 1, 2 and 6."""
    image = corpus.open_checked(entry)
    check_stages(impl, RESIZING, image)
    companion = Image.frombytes("RGBA", (3, 2), bytes(range(0, 240, 10)))
    for policy in ("PR_33921", "RELEASED"):
        check_eager_equals_deferred(impl, policy, RESIZING, [image, companion], [[1], [0]], "cpu")
    check_alpha_semantics(impl, "RELEASED", image, BG)
    assert np.asarray(image).size > 0
