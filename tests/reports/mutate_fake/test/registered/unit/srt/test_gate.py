"""The fake checkout's own unit tests of ``sglang/srt/gate.py``: the anchor of `deferlab mutate --anchor`'s tests.

Data of the fake checkout, not a test of deferlab (``mutate_fake/conftest.py``
keeps deferlab's own runs from collecting it): it runs only on a fake tree the
loader ``load_tree.py`` put on ``sys.path``.
"""

import unittest

from sglang.srt.gate import patches, should_defer


class TestGate(unittest.TestCase):
    def test_a_tie_defers(self):
        # the tie the fake C1 never asks: only this test sees should_defer's <= become <
        self.assertTrue(should_defer(2, 2))

    def test_one_patch_for_a_patch_sized_image(self):
        # blind to what the fake C3 checks (28x28 and 29x28)
        self.assertEqual(patches(14, 14, 14), 1)


def test_needs_a_gpu():
    # fails on the unmutated tree on a CPU: the anchor's reference says it cannot run here
    raise RuntimeError("needs a CUDA device")
