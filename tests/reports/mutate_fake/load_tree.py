"""The anchor's loader for the fake tree (in place of ``deferlab.impl.sglang.sources.load``): the fake ``sglang``
package importable from the tree, its gate imported (its import-time check may refuse, as a broken tree does)."""

import sys


def load(tree):
    sys.path.insert(0, str(tree))
    import sglang.srt.gate  # noqa: F401
