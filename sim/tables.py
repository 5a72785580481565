"""Building a dataclass from one table of a scenario file, refusing keys it does not have."""

from __future__ import annotations

from dataclasses import fields
from typing import Any, TypeVar

from deferlab.reference.system.errors import ScenarioError

T = TypeVar("T")


def dataclass_from_table(cls: type[T], table: dict[str, Any], where: str) -> T:
    """``cls(**table)``, after an error naming every key ``cls`` has no field for, and the accepted ones."""
    known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(table) - known)
    if unknown:
        raise ScenarioError(f"{where}: unknown key(s) {unknown}; accepted: {sorted(known)}")
    return cls(**table)
