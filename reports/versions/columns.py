"""The columns of the versions matrix: one per (release, model family, served path).

Why a column per served path and family: one engine load judges every family asked (``--model``), and each
family is served one or two ways (vLLM's default device-normalized path and the host-normalized row beside
it), each with verdicts of its own. A column is named as its verdicts are (`reference.system.systems.
path_label`), with the release in place of the engine's label: Kimi-K3's default path keeps today's names
(``0.5.23``, ``vllm-0.34.0``), so a baseline written before still reads; a non-default path follows it
(``vllm-0.34.0 host-normalized``) and another family prefixes it (``qwen3-vl:vllm-0.34.0``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from deferlab.reference.system.families import family as family_facts
from deferlab.reference.system.rows import Column as VerdictColumn
from deferlab.reference.system.systems import (
    DEFAULT_FAMILY,
    column,
    column_key,
    engine,
    family_column,
    split_column,
)


@dataclass(frozen=True)
class Column:
    """One column: the release (engine, version), the family and the served path (None: the engine's default)."""

    engine: str
    version: str
    family: str = DEFAULT_FAMILY
    path: str | None = None

    @property
    def release(self) -> str:
        """The release's own column (``0.5.23``, ``vllm-0.34.0``): where its errors, seconds and system go."""
        return column(self.engine, self.version)

    @property
    def name(self) -> str:
        return family_column(self.release + (f" {self.path}" if self.path else ""), self.family)

    @property
    def default(self) -> bool:
        """Whether this is the family's default serving path (no path named)."""
        return self.path is None

    def describe(self) -> dict[str, Any]:
        return {"release": self.release, "engine": self.engine, "version": self.version, "family": self.family,
                "path": self.path}  # fmt: skip


def of_label(engine_name: str, version: str, label: str) -> Column:
    """The column of a run's verdict column ``label`` (``qwen3-vl:VLLM host-normalized``) on that release."""
    found = VerdictColumn.parse(label)
    return Column(engine_name, version, found.family_name, found.path or None)


def parse(name: str) -> Column:
    """A column's name read back (`Column.name`'s inverse)."""
    found = VerdictColumn.parse(name)
    engine_name, version = split_column(found.label)
    return Column(engine_name, version, found.family_name, found.path or None)


def key(name: str) -> tuple[Any, ...]:
    """Column order: engines in registry order, each oldest release first; in a release Kimi-K3 first, then the
    registry's families, each default path before its others."""
    from deferlab.reference.system.families import FAMILIES

    c = parse(name)
    return (*column_key(c.release), list(FAMILIES).index(c.family), c.path is not None, c.path or "")


def not_served(engine_name: str, version: str, family: str) -> str | None:
    """The ``n/a`` line of a family the release does not serve (`reference.system.families.Family.not_served`)."""
    return family_facts(family).not_served(engine(engine_name).name, version)
