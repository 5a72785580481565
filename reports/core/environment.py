"""What the report ran on: versions and device, so two reports can be told apart."""

from __future__ import annotations

import platform
from importlib import metadata
from typing import Any


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def device_description() -> str:
    """``cuda:<name>`` when torch sees a GPU, else ``cpu`` (``unknown`` if torch cannot be imported)."""
    try:
        import torch
    except Exception:
        return "unknown (torch not importable)"
    if torch.cuda.is_available():
        return f"cuda:{torch.cuda.get_device_name(0)}"
    return "cpu"


def environment() -> dict[str, Any]:
    """Python, numpy, torch, pillow, hypothesis versions and the device."""
    return {
        "python": platform.python_version(),
        "numpy": _version("numpy"),
        "torch": _version("torch"),
        "pillow": _version("pillow"),
        "hypothesis": _version("hypothesis"),
        "matplotlib": _version("matplotlib"),
        "pytest_benchmark": _version("pytest-benchmark"),
        "platform": platform.platform(),
        "device": device_description(),
    }
