"""Release order and claim order, the two orders every part of deferlab sorts by.

Why a module of its own: the registry of engines (`reference.system.engines`), of model families
(`reference.system.families`) and of systems under test (`reference.system.systems`) all compare releases, and
none may import the one above it. Release order is `packaging.version`'s (PEP 440: ``0.5.6.post1`` after
``0.5.6``, ``0.10.1.1`` after ``0.10.1``); claim order is numeric on the id (``C2`` before ``C10``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from packaging.version import InvalidVersion, Version


def release_key(version: str) -> tuple[int, Version | str]:
    """Sort key of a release: PEP 440 order; anything that is not a version sorts after every release."""
    try:
        return (0, Version(str(version)))
    except InvalidVersion:
        return (1, str(version))


def is_release(version: str) -> bool:
    """Whether ``version`` is a PEP 440 version (a release name, not a path or ``installed``)."""
    return release_key(version)[0] == 0


def in_range(version: str, low: str, high: str = "") -> bool:
    """Whether ``version`` is in ``low``..``high`` (inclusive; ``high`` "" for every later release), in release order.

    The one version-range rule (an engine's path for a family, a claims.toml expectation, the releases listed from
    a first one): a spec that is not a release (a checkout, ``installed``) sorts after every release
    (`release_key`), so it is in every open-ended range (what its code says decides) and in no closed one."""
    key = release_key(version)
    return key >= release_key(low) and (not high or key <= release_key(high))


def at_least(version: str, minimum: str) -> bool:
    """Whether release ``version`` is ``minimum`` or later (False for a non-version): a release in the open range."""
    return is_release(version) and in_range(version, minimum)


def sorted_releases(versions: Iterable[str]) -> list[str]:
    """``versions`` in release order, duplicates dropped."""
    return sorted(dict.fromkeys(versions), key=release_key)


_CLAIM = re.compile(r"^([A-Za-z]*)(\d+)(.*)$")


def claim_key(claim_id: str) -> tuple[int, int, str]:
    """Sort key of a claim id: ``C2`` before ``C10``; a property unit (``P:...``) or other name after them."""
    m = _CLAIM.match(str(claim_id))
    if m is None or m.group(1) != "C":
        return (1, 0, str(claim_id))
    return (0, int(m.group(2)), m.group(3))


def sorted_claims(ids: Iterable[str]) -> list[str]:
    return sorted(dict.fromkeys(ids), key=claim_key)
