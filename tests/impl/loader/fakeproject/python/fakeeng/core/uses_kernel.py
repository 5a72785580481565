"""Imports a compiled module the release wheel ships (``_kernels.abi3.so``, never unpacked): a stand-in is allowed."""

import fakeeng.core._kernels as kernels

FAST = kernels.fast_path
