"""impl on the real-image corpus (small files), and impl's import boundary."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from deferlab.impl.model import get_image_features
from deferlab.impl.pipeline import preprocess
from deferlab.impl.processor import Processor
from deferlab.impl.staging import to_chw_uint8
from deferlab.impl.transport import deliver
from deferlab.reference.oracle import corpus
from tests.impl.support import bf16_bits, corpus_image, reference_module, small_config

SMALL = sorted(e.name for e in corpus.entries() if e.width <= 64 and e.height <= 64)
CFG = small_config(in_patch_limit=32, patch_limit_on_one_side=8)


@pytest.mark.parametrize("name", SMALL)
def test_corpus_staging_matches_reference(name: str) -> None:
    """PIL's own conversion (impl) and the oracle's NumPy conversion stage every small corpus image alike."""
    stage = reference_module("stage")
    img = corpus_image(name)
    assert np.array_equal(to_chw_uint8(img).numpy(), stage.to_chw_uint8(img))


@pytest.mark.parametrize("name", SMALL)
def test_corpus_eager_equals_deferred(name: str) -> None:
    """Each small corpus image, resized to about 0.7x where it can be: the owner's BF16 features equal the eager ones."""
    img = corpus_image(name)
    w, h = img.size
    cfg = small_config(in_patch_limit=max(1, (w // 4) * (h // 4) // 2), patch_limit_on_one_side=64)
    deferred = Processor(cfg, cuda_available=True, device="cpu").process([img])
    eager = Processor(cfg, cuda_available=False, device="cpu").process([img])
    assert deferred.deferred is True and eager.deferred is False
    d = get_image_features(deliver(deferred.items, "cpu", 1).rank_items[0], 1, config=cfg, device="cpu")
    e = get_image_features(eager.items, 1, config=cfg, device="cpu")
    assert torch.equal(bf16_bits(d.features), bf16_bits(e.features))


def test_corpus_request_matches_reference() -> None:
    """All small corpus images as one request: grids equal the oracle's and pixel values differ only at ties."""
    pipeline = reference_module("pipeline")
    resample = reference_module("resample")
    imgs = [corpus_image(n) for n in SMALL]
    pv, grids = preprocess(imgs, CFG, device="cpu")
    ref_pv, ref_grids = pipeline.preprocess(imgs, CFG, arithmetic="cpu", fused=True)
    assert np.array_equal(grids.numpy(), ref_grids)
    if not np.array_equal(pv.numpy(), ref_pv):  # then the resize must explain it, image by image
        from deferlab.impl.resize import resize_bicubic_if_needed

        for img in imgs:
            tr = pipeline.trace(img, CFG, arithmetic="cpu", fused=True)
            if tr.resized is None:
                continue
            rc = tr.resize_config
            mine = resize_bicubic_if_needed(torch.from_numpy(tr.staged)[None], rc.new_height, rc.new_width)[0]
            assert resample.classify_disagreement(tr.resized, mine.numpy()).all(), img
