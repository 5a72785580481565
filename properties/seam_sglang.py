"""Shim until the integrator points its importers at `deferlab.impl.sglang.driver` (SGLangImpl is the seam now)."""

from deferlab.impl.sglang.driver import LABEL, SGLangImpl  # noqa: F401


def SGLangSeam(spec=None, driver=None):  # noqa: N802 - the old class name, for callers not yet moved
    return driver if driver is not None else SGLangImpl(spec)
