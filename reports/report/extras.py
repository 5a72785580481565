"""The optional extras a part of the report needs: one check, one line naming the extra.

Why one helper: the numba-compiled C13 geometry sweep and the checkpoint-vs-vLLM benchmark need numba (the
``deferlab[vllm]`` extra), and the README's first command installs only ``.[test]``. There ``deferlab report``
must still exit 0: a part that needs a missing extra is skipped with this line, never failed, and every use
of numba in the report asks here first.
"""

from __future__ import annotations

import importlib.util

EXTRAS = {"numba": "vllm"}  # module -> the extra of pyproject.toml that installs it


def installed(module: str) -> bool:
    """Whether ``module`` can be imported (found, not imported: numba takes seconds to import)."""
    return importlib.util.find_spec(module) is not None


def missing(module: str) -> str | None:
    """None when ``module`` is installed; else one line: what is missing and how to install it."""
    if installed(module):
        return None
    extra = EXTRAS[module]
    return f"needs {module} (the deferlab[{extra}] extra): pip install 'deferlab[{extra}]'"
