"""The anchor's child for the fake tree, in place of ``python -m deferlab.impl.loader run sglang TREE -- ARGS``:
``load_tree.py TREE -- ARGS`` puts the fake ``sglang`` package on the path and imports its gate (whose
import-time check may refuse, as a broken tree does: the loader's one line and its exit status), then runs
pytest ARGS in this process."""

import sys

from deferlab.impl.loader.__main__ import ERROR_MARK, LOAD_FAILED


def main(argv):
    tree, args = argv[0], argv[argv.index("--") + 1 :]
    sys.path.insert(0, str(tree))
    try:
        import sglang.srt.gate  # noqa: F401
    except Exception as e:
        print(f"{ERROR_MARK}{type(e).__name__}: {e}", file=sys.stderr)
        return LOAD_FAILED
    import pytest

    return int(pytest.main(args))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
