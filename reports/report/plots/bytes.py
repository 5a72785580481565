"""C20's picture: the trained decode and the served decode of the same bytes side by side, and where they differ.

Why: "121 of 187 pixels differ" says that an engine's loader disagrees with the checkpoint's; the two images and
their difference, amplified and cropped to where it lies, say how (a white band where alpha was 0, a mirrored or
turned image, grey rows where a truncated file ended) (semantics §20.8). Written atomically, at a fixed size
(`FIGSIZE` x `DPI`), so a report's layout does not move with the image.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from deferlab.reference.system.errors import InputValueError  # noqa: E402
from deferlab.reports.core.atomic import write_with_atomic  # noqa: E402

FIGSIZE, DPI = (9.0, 3.6), 100  # the PNG is 900 x 360 pixels


def _image(value: object, name: str) -> np.ndarray:
    """``value`` as (H, W, 3) uint8; one line naming ``name`` and what is accepted otherwise."""
    accepted = "accepted: a non-empty uint8 array (H, W), (H, W, 1), (H, W, 3) or (H, W, 4)"
    if not isinstance(value, np.ndarray) or value.dtype != np.uint8 or value.size == 0:
        got = type(value).__name__ if not isinstance(value, np.ndarray) else f"{value.dtype} {value.shape}"
        raise InputValueError(f"side_by_side: {name} is {got}; {accepted}")
    if value.ndim == 2:
        value = value[..., None]
    if value.ndim != 3 or value.shape[2] not in (1, 3, 4):
        raise InputValueError(f"side_by_side: {name} has shape {value.shape}; {accepted}")
    return np.repeat(value, 3, axis=2) if value.shape[2] == 1 else value[..., :3]


def _crop(differ: np.ndarray) -> tuple[slice, slice]:
    """The rows and columns that hold every differing pixel, one pixel of margin; everything when none differs."""
    if not differ.any():
        return slice(None), slice(None)
    ys, xs = np.nonzero(differ)
    h, w = differ.shape
    return slice(max(ys.min() - 1, 0), min(ys.max() + 2, h)), slice(max(xs.min() - 1, 0), min(xs.max() + 2, w))


def side_by_side(trained: np.ndarray, served: np.ndarray, title: str, path: Path) -> Path:
    """A PNG at ``path``: the trained decode, the served decode and their amplified difference (|trained -
    served| summed over channels, scaled so the largest is white), cropped to where they differ. Images of
    different sizes (an EXIF orientation applied on one side only) are shown whole, the difference panel saying
    so. Returns ``path``."""
    a, b = _image(trained, "trained"), _image(served, "served")
    if Path(path).suffix.lower() != ".png":
        raise InputValueError(f"side_by_side: path {str(path)!r} is not a .png file; accepted: a path ending .png")
    fig, axes = plt.subplots(1, 3, figsize=FIGSIZE)
    fig.suptitle(title, fontsize=10)
    if a.shape == b.shape:
        diff = np.abs(a.astype(np.int16) - b.astype(np.int16)).sum(axis=2)
        rows, cols = _crop(diff > 0)
        a, b, diff = a[rows, cols], b[rows, cols], diff[rows, cols]
        gain = 255.0 / max(int(diff.max()), 1)
        axes[2].imshow(np.clip(diff * gain, 0, 255).astype(np.uint8), cmap="magma", vmin=0, vmax=255)
        axes[2].set_title(f"|difference| x{gain:.3g} ({int((diff > 0).sum())} pixels)", fontsize=9)
    else:
        axes[2].text(0.5, 0.5, f"sizes differ:\n{a.shape[1]}x{a.shape[0]} trained\n{b.shape[1]}x{b.shape[0]} served",
                     ha="center", va="center", fontsize=10)  # fmt: skip
        axes[2].set_title("difference", fontsize=9)
    for ax, image, name in ((axes[0], a, "trained"), (axes[1], b, "served")):
        ax.imshow(image, interpolation="nearest")
        ax.set_title(f"{name} ({image.shape[1]}x{image.shape[0]})", fontsize=9)
    for ax in axes:
        ax.set_xticks([])
        ax.set_yticks([])
    write_with_atomic(path, lambda tmp: fig.savefig(tmp, dpi=DPI, format="png"))
    plt.close(fig)
    return Path(path)
