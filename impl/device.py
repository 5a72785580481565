"""Device resolution shared by every entry point (`device=None` means CUDA when present)."""

from __future__ import annotations

import torch

from deferlab.reference.system.errors import InputTypeError


def resolve_device(device: str | torch.device | None) -> torch.device:
    """``None`` -> ``cuda`` when available, else ``cpu``; strings and devices pass through validated."""
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if not isinstance(device, (str, torch.device)):
        raise InputTypeError(f"device must be a str, a torch.device or None, got {type(device).__name__}")
    return torch.device(device)
