"""deferlab's optional extras: what each installs, and the one line that names a missing one.

Why one place: the README's install (``pip install torch==2.13.0 -e '.[test]'``) has none of them, and
both the report (a step that needs an extra is skipped with one line naming it, never failed) and the test
suite (a test that needs one is skipped with that line as its reason, marker ``extra(NAME)``) must say
the same thing. ``pyproject.toml``'s ``[project.optional-dependencies]`` is what installs them;
``tests/project/test_packaging.py`` checks the two agree.
"""

from __future__ import annotations

import importlib.util

# extra -> (the modules it provides that deferlab imports, what deferlab uses it for)
EXTRAS: dict[str, tuple[tuple[str, ...], str]] = {
    "vllm": (
        ("numba", "pydantic"),
        "vLLM's Kimi-K3 patch writer, its ModelConfig and the compiled C13 geometry sweep",
    ),
    "mutate": (("cosmic_ray",), "deferlab mutate (cosmic-ray's mutation operators)"),
    "cluster": (("ray",), "running versions, compare and mutate on a Ray cluster (--cluster)"),
    "video": (
        ("av", "cv2", "qwen_vl_utils"),
        "videos and encoded images as a client sends them: clips encoded by PyAV, the engines' OpenCV video "
        "backend, and the Qwen model cards' own recipe (qwen-vl-utils)",
    ),
    "transformers": (
        ("transformers", "huggingface_hub"),
        "the trained side of the families whose checkpoints name a transformers image processor, and the "
        "hub helpers the engines' pinned transformers imports for their Qwen and InternVL paths",
    ),
}


# a module whose distribution on the package index is named otherwise (pyproject.toml names the distribution)
DISTRIBUTIONS = {"cv2": "opencv-python-headless"}


def installed(module: str) -> bool:
    """Whether ``module`` can be imported (found, not imported: numba takes seconds to import)."""
    return importlib.util.find_spec(module) is not None


def missing(extra: str) -> tuple[str, ...]:
    """The modules of ``extra`` this environment lacks (empty: it is installed). KeyError for an unknown extra."""
    modules, _ = EXTRAS[extra]
    return tuple(m for m in modules if not installed(m))


def has(extra: str) -> bool:
    return not missing(extra)


def why_missing(extra: str) -> str | None:
    """None when ``extra`` is installed; else the one line: what is missing, what needs it, how to install it."""
    gone = missing(extra)
    if not gone:
        return None
    _, purpose = EXTRAS[extra]
    return f"needs the optional extra '{extra}' ({', '.join(gone)} not installed; for {purpose}): pip install 'deferlab[{extra}]'"


def module_missing(module: str) -> str | None:
    """None when ``module`` imports here; else one line naming it and the extra that installs it (the report's
    skip line for a step that needs it)."""
    if installed(module):
        return None
    extra = next(name for name, (modules, _) in EXTRAS.items() if module in modules)
    return f"needs {module} (the deferlab[{extra}] extra): pip install 'deferlab[{extra}]'"
