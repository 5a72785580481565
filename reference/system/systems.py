"""The systems under test: deferlab's model or a real engine at a spec, serving one model family (or all).

Why one registry: every command runs "the claims of one system under test" (`reports.core.runner`), and each
needs the same facts about it. The engines' facts are `reference.system.engines`, the model families'
`reference.system.families`, release and claim order `reference.system.releases`; this module pairs them
(`System`) and names the columns of a matrix, and re-exports the engines' and the orders' names so a caller
imports one module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from deferlab.reference.system.engines import (  # noqa: F401 - the registry's names, re-exported
    ALL_FAMILIES,
    DEFAULT_FAMILY,
    ENGINES,
    LABELS,
    MODEL,
    EngineFacts,
    engine,
    engine_of_label,
    family_column,
    path_label,
    split_label,
)
from deferlab.reference.system.errors import DeferlabInputError
from deferlab.reference.system.families import BYTES_CLAIMS, VIDEO_CLAIMS
from deferlab.reference.system.families import family as family_facts
from deferlab.reference.system.releases import (  # noqa: F401
    at_least,
    claim_key,
    is_release,
    release_key,
    sorted_claims,
    sorted_releases,
)

REQUEST_CLAIMS = (*VIDEO_CLAIMS, *BYTES_CLAIMS)  # asked of a family's columns only, Kimi-K3's too (semantics §20)


# --- a column of a matrix ------------------------------------------------------------------------------------------
def column(engine_name: str, version: str) -> str:
    """The matrix column (and baseline key) of a release: ``0.5.23`` for SGLang, ``vllm-0.33.0`` for vLLM."""
    return engine(engine_name).column_prefix + version


def split_column(name: str) -> tuple[str, str]:
    """(engine, version) of a column (`column`'s inverse)."""
    for facts in ENGINES.values():
        if facts.column_prefix and name.startswith(facts.column_prefix):
            return facts.name, name[len(facts.column_prefix) :]
    return "sglang", name


def column_key(name: str) -> tuple[int, tuple[int, Any]]:
    """Column order: engines in registry order, each oldest release first."""
    engine_name, version = split_column(name)
    return (list(ENGINES).index(engine_name), release_key(version))


# --- one system under test -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class System:
    """One system under test: deferlab's model (``engine`` `MODEL`, optionally another seam implementation,
    ``impl``) or a real engine at ``spec`` (a release, ``installed``, a checkout path)."""

    engine: str = MODEL
    spec: str | None = None
    impl: str | None = None
    family: str = DEFAULT_FAMILY

    def __post_init__(self) -> None:
        if self.engine != MODEL:
            engine(self.engine)  # validates the name
            if not self.spec:
                raise DeferlabInputError(f"{self.engine}: a SPEC is needed ('installed', a checkout path, a release)")

    @property
    def real(self) -> bool:
        return self.engine != MODEL

    @property
    def facts(self) -> EngineFacts | None:
        return ENGINES.get(self.engine)

    @property
    def label(self) -> str | None:
        """The one verdict label of a real engine; None for the model (its columns are policies)."""
        return self.facts.label if self.facts else None

    @property
    def key(self) -> str:
        """``sglang:0.5.23``, ``vllm:/src/vllm``, ``model`` (or ``model:module:object``), prefixed ``FAMILY/``
        for a family other than the default."""
        key = f"{self.engine}:{self.spec}" if self.real else (f"{MODEL}:{self.impl}" if self.impl else MODEL)
        return key if self.family == DEFAULT_FAMILY else f"{self.family}/{key}"

    @property
    def suite(self) -> str:
        """The part of the shipped checks this system runs (relative to the ``properties`` folder)."""
        return self.facts.suite if self.facts else "claims"

    def pytest_options(self) -> list[str]:
        """The plugin's options that name this system (``--sglang SPEC``, ``--vllm SPEC``, ``--impl NAME``, and
        ``--model FAMILY`` for a family other than the default)."""
        family = ["--model", self.family] if self.family != DEFAULT_FAMILY else []
        if self.real:
            return [engine(self.engine).option, str(self.spec), *family]
        return (["--impl", self.impl] if self.impl else []) + family

    def answers(self, claim_id: str, family: str | None = None) -> bool:
        """Whether this system has a verdict for ``claim_id`` in the column of ``family`` (default its own): the
        engine's claim set, and for a family other than Kimi-K3 that family's claims (`reference.system.families`)."""
        family = family or self.family
        if family == ALL_FAMILIES:
            raise ValueError("answers: name the family of the column (this system runs every family)")
        if family != DEFAULT_FAMILY or claim_id in REQUEST_CLAIMS:
            if claim_id not in family_facts(family).claims:
                return False
        return self.facts.answers(claim_id) if self.facts else True
