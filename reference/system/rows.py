"""The typed row of ``verdicts.json``: a verdict (an enum), a column (a structure), a counterexample (a value).

Why: the results file is read by every command (report, versions, compare, repro, mutate, baselines), and each
reader used to pick a row's dict keys by name and split the column's text (``"FAMILY:LABEL PATH"``) itself.
Here is the one reading of a row: `Row.from_dict` takes a row of any readable schema (1, 2 or 3) and `to_dict`
gives it back unchanged, so a file written before still reads and a reader needs no string surgery. A `Row` is
also a read-only mapping of its JSON keys (``row["id"]``, ``row.get("policy")``), so code not yet converted
keeps working on it.

Schema 3 (`reference.system.claims.SCHEMA_VERSION`) adds two keys beside the old ones, which stay as they were:
``"column"`` (`Column.to_dict`: family, label, engine, release, path) and ``"counterexample_input"``
(`Counterexample.to_dict`: kind, arguments, and Hypothesis's reproduction blob when one was printed).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from typing import Any

from deferlab.reference.system.engines import DEFAULT_FAMILY, ENGINES, engine_of_label
from deferlab.reference.system.releases import is_release


class Verdict(StrEnum):
    """A claim's verdict; the values are the strings ``verdicts.json`` has always held (`claims.VERDICTS`)."""

    HOLDS = "holds"
    FAILS = "fails"
    CAVEAT = "holds-with-caveat"
    NA = "n/a"  # the implementation has no such feature: the claim cannot apply
    NOT_RUN = "not-run"

    @classmethod
    def parse(cls, text: str) -> Verdict:
        """The verdict ``text`` names; ValueError naming it and the accepted ones."""
        try:
            return cls(str(text))
        except ValueError:
            raise ValueError(f"verdict {text!r}: accepted {', '.join(v.value for v in cls)}") from None


@dataclass(frozen=True)
class Column:
    """A verdict column: ``[FAMILY:]LABEL[ PATH]``, e.g. ``qwen3-vl:VLLM host-normalized``, ``RELEASED``, or a
    matrix's ``internvl:vllm-0.34.0`` (the release in place of the engine's label).

    ``family`` is None where the text names none (Kimi-K3's column, `family_name`); ``label`` is an engine's
    label, a modelled policy, or a release column; ``path`` is None on the engine's default serving path.
    `parse` and ``str`` are exact inverses on every string, so a column read and written back is the same text."""

    label: str
    family: str | None = None
    path: str | None = None

    @classmethod
    def parse(cls, text: str) -> Column:
        """The column ``text`` names (`str`'s inverse; `systems.split_label` read as a structure)."""
        text = str(text)
        family, colon, rest = text.rpartition(":")
        head, space, path = rest.partition(" ")
        return cls(head, family if colon else None, path if space else None)

    def __str__(self) -> str:
        return (
            (f"{self.family}:" if self.family is not None else "")
            + self.label
            + (f" {self.path}" if self.path is not None else "")
        )

    @property
    def family_name(self) -> str:
        """The model family of the column (no prefix: the default family, Kimi-K3)."""
        return self.family or DEFAULT_FAMILY

    @property
    def engine(self) -> str | None:
        """The engine whose column this is (by its label, or by a release column's prefix); None: a policy."""
        facts = engine_of_label(self.label)
        if facts is not None:
            return facts.name
        found = self._release()
        return found[0] if found else None

    @property
    def release(self) -> str | None:
        """The release a matrix column carries (``0.34.0`` of ``vllm-0.34.0``); None for a run's label."""
        found = self._release()
        return found[1] if found else None

    def _release(self) -> tuple[str, str] | None:
        """(engine, version) when ``label`` is a release column (`systems.column`'s form: the engine's column
        prefix, then the version; SGLang's prefix is empty), else None."""
        by_prefix = sorted(ENGINES.values(), key=lambda f: -len(f.column_prefix))  # the empty prefix last
        facts = next(f for f in (*by_prefix, None) if f is None or self.label.startswith(f.column_prefix))
        if facts is None or not is_release(self.label[len(facts.column_prefix) :]):
            return None
        return facts.name, self.label[len(facts.column_prefix) :]

    def to_dict(self) -> dict[str, Any]:
        """The column as schema 3 writes it beside the row's ``policy`` text (engine and release for a reader)."""
        return {"family": self.family, "label": self.label, "engine": self.engine, "release": self.release,
                "path": self.path}  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Column:
        """`to_dict`'s inverse (engine and release follow from the label)."""
        return cls(str(data["label"]), data.get("family"), data.get("path"))


@dataclass(frozen=True)
class Counterexample:
    """A claim's counterexample: ``kind`` and ``arguments`` (JSON values) a reproducer rebuilds it from, the
    Hypothesis reproduction ``blob`` when one was printed, and ``text``: the described value rows have always
    carried (``counterexample``). ``kind`` "text" means only the description is known."""

    kind: str = "text"
    arguments: dict[str, Any] = field(default_factory=dict)
    blob: str | None = None
    text: Any = None

    def to_dict(self) -> dict[str, Any]:
        """The structured part (the text stays in the row's ``counterexample`` key)."""
        return {"kind": self.kind, "arguments": self.arguments, **({"blob": self.blob} if self.blob else {})}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None, text: Any = None) -> Counterexample:
        """The counterexample of a row: its structured part (schema 3) and its text; a row without the structured
        part (schema 1 or 2) gives kind "text"."""
        if not data:
            return cls("text", {}, None, text)
        return cls(str(data.get("kind", "text")), dict(data.get("arguments") or {}), data.get("blob"), text)


_KEYS = ("id", "statement", "source", "policy", "verdict", "evidence", "counterexample", "provenance")
_OPTIONAL = ("signatures", "figure", "impact")  # written only when recorded
_TYPED = ("column", "counterexample_input")  # schema 3
_ALL = (*_KEYS, *_OPTIONAL, *_TYPED)


@dataclass(frozen=True, eq=False)
class Row(Mapping[str, Any]):
    """One (claim, column) row of ``verdicts.json``, typed; read-only mapping of its JSON keys for old readers.

    ``absent`` names the keys of `_KEYS` the row it was read from lacked, and ``extra`` holds keys this deferlab
    does not know, so `to_dict` gives back exactly what `from_dict` read (a schema-1 or -2 row unchanged)."""

    id: str
    column: Column
    verdict: Verdict
    evidence: str = ""
    statement: str = ""
    source: str = ""
    counterexample: Counterexample | None = None
    provenance: dict[str, Any] = field(default_factory=dict)
    signatures: list[dict[str, Any]] | None = None
    figure: dict[str, Any] | None = None
    impact: dict[str, Any] | None = None
    typed: bool = True  # whether `to_dict` writes schema 3's ``column`` and ``counterexample_input``
    absent: frozenset[str] = frozenset()
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def claim(self) -> str:
        return self.id

    @property
    def policy(self) -> str:
        """The column's text, as rows have always named it."""
        return str(self.column)

    @property
    def severity(self) -> str | None:
        """A failing row's class (semantics §21.3: crash, sequence, tower-input, float32-only, cost), read off what
        it recorded by `reference.system.impact`'s one rule; None when it does not fail or its claim has none."""
        from deferlab.reference.system.impact import of_verdict_row

        found = of_verdict_row(self)
        return None if found is None else found.label

    @property
    def failure_line(self) -> str:
        """The evidence's first line (a failing row's: what failed, as recorded)."""
        return next((line.strip() for line in self.evidence.splitlines() if line.strip()), "")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Row:
        """A row of any readable schema; ValueError naming the row when it has no ``id``, ``policy`` or a known
        ``verdict``."""
        missing = [k for k in ("id", "policy", "verdict") if k not in data]
        if missing:
            raise ValueError(f"verdicts row {dict(data)!r}: missing {missing}; a row needs id, policy and verdict")
        column = Column.parse(str(data["policy"]))
        ce = data.get("counterexample")
        typed = data.get("counterexample_input")
        return cls(
            id=str(data["id"]),
            column=column,
            verdict=Verdict.parse(data["verdict"]),
            evidence=str(data.get("evidence", "")),
            statement=str(data.get("statement", "")),
            source=str(data.get("source", "")),
            counterexample=None if ce is None and not typed else Counterexample.from_dict(typed, ce),
            provenance=dict(data.get("provenance") or {}),
            signatures=data.get("signatures"),
            figure=data.get("figure"),
            impact=data.get("impact"),
            typed="column" in data or "counterexample_input" in data,
            absent=frozenset(k for k in _KEYS if k not in data),
            extra={k: v for k, v in data.items() if k not in _ALL},
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON row: the old keys as they always were, then (``typed``) schema 3's structured ones."""
        return dict(self._json)

    @cached_property
    def _json(self) -> dict[str, Any]:
        """`to_dict`, made once (a row is read-only; the mapping view reads it per key)."""
        ce = self.counterexample
        values: dict[str, Any] = {
            "id": self.id, "statement": self.statement, "source": self.source, "policy": str(self.column),
            "verdict": self.verdict.value, "evidence": self.evidence, "counterexample": ce.text if ce else None,
            "provenance": self.provenance,
        }  # fmt: skip
        out = {k: v for k, v in values.items() if k not in self.absent}
        out.update({k: getattr(self, k) for k in _OPTIONAL if getattr(self, k) is not None})
        if self.typed:
            out["column"] = self.column.to_dict()
            out["counterexample_input"] = ce.to_dict() if ce is not None else None
        out.update(self.extra)
        return out

    # the read-only mapping of the JSON keys (code written against the dict rows); equal to its JSON row
    def __eq__(self, other: object) -> bool:
        if isinstance(other, Row):
            return self._json == other._json
        if isinstance(other, Mapping):
            return self._json == dict(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment] - mutable values inside, as the dict row was

    def __getitem__(self, key: str) -> Any:
        return self._json[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._json)

    def __len__(self) -> int:
        return len(self._json)
