"""Deliberately broken implementations, each one line from deferlab's own (``--impl deferlab.properties.broken:NAME``).

They exist to prove the properties can fail: ``claims/test_seam.py`` resolves
each through the same resolver ``--impl`` uses and shows that property 1, 2
or 3 finds a counterexample that the real implementation passes. Never use
them for anything else. Each overrides one method and passes the protocol's
arguments through (``**kwargs``), so a signature change of the protocol lands
in `impl.seam.DeferlabImpl` alone instead of in a copy here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from deferlab.impl.seam import DeferlabImpl


class BrokenStaging(DeferlabImpl):
    """Stages colour channels in BGR order (property 1 must catch it at the staging stage)."""

    name = "broken-staging"

    def to_chw_uint8(self, image: Any, **kwargs: Any) -> Any:
        x = super().to_chw_uint8(image, **kwargs)
        return x[[2, 1, 0, *range(3, x.shape[0])]]  # the bug: R and B swapped


class BrokenOwnerOrder(DeferlabImpl):
    """The owner returns its images sorted by index, not in the order it was given (property 2 must catch it)."""

    name = "broken-owner-order"

    def materialize(self, items: Sequence[Any], owner_indices: Sequence[int], *args: Any, **kwargs: Any) -> Any:
        return super().materialize(items, sorted(owner_indices), *args, **kwargs)  # the bug: sorted


class BrokenGateTie(DeferlabImpl):
    """The gate keeps a request eager when raw == processed bytes; semantics §4 says ties defer (property 3)."""

    name = "broken-gate-tie"

    def defer_decisions(self, images: Sequence[Any], config: Any, **kwargs: Any) -> list[bool]:
        decided = super().defer_decisions(images, config, **kwargs)
        raw, processed = self.gate_bytes(images, config)
        return [d and raw != processed for d in decided]  # the bug: a tie no longer defers


class BrokenPromotion(DeferlabImpl):
    """The eager path promotes an RGB image with a ``transparency`` key to RGBA (claim C2's property must catch it).

    No K3 commit ever did this (semantics §3.1); it is the rule C2 guards against.
    """

    name = "broken-promotion"
    _processor_options = {"promote_rgb_transparency": True}  # the bug, on the producer's eager path too

    def to_chw_uint8(self, image: Any, **kwargs: Any) -> Any:
        kwargs["promote_rgb_transparency"] = True  # the bug: keyed RGB becomes RGBA
        return super().to_chw_uint8(image, **kwargs)
