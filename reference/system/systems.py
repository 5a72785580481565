"""The systems under test, registered once: deferlab's model and each real engine.

Why one registry: every command runs "the claims of one system under test" (`reports.core.runner`), and each
needs the same facts about it: the engine's name and display name, its verdict label, its first release
with the checked path, which claims it answers, which checks of the suite it runs, and which of deferlab's
modules load it, drive it and serve its path. They live here, once; the model-family axis (semantics §18)
is registered beside them in `reference.system.families`. Module paths are strings (this room imports
nothing of ``impl``): a caller that needs the code imports it.

Release order is `packaging.version`'s (PEP 440: ``0.5.6.post1`` after ``0.5.6``, ``0.10.1.1`` after
``0.10.1``); claim order is numeric on the id (``C2`` before ``C10``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from deferlab.reference.system.errors import DeferlabInputError

MODEL = "model"  # deferlab's own torch model: its columns are the modelled policies, not a label
DEFAULT_FAMILY = "kimi-k3"
ALL_FAMILIES = "all"  # --model all: every family of the registry, in one run of one engine


@dataclass(frozen=True)
class EngineFacts:
    """One real engine: names, where its checks and drivers are, and which claims it answers.

    ``claims``: the claim ids it has verdicts for (None: every claim of ``claims.toml``); ``suite``: the part
    of the shipped checks it runs, relative to the ``properties`` folder; ``sources``: the module whose
    ``load(spec)`` installs one copy in a process; ``load_check``: ``module:callable`` a load check builds
    (the driver, where building it is what "loads" means); ``served``: the module whose ``paths(...)`` gives
    its served paths; ``column_prefix``: the prefix of its columns in a matrix (SGLang's are bare versions).
    """

    name: str
    display: str
    article: str
    label: str
    first_release: str
    example_release: str
    claims: tuple[str, ...] | None
    suite: str
    sources: str
    load_check: str
    driver: str
    column_prefix: str

    @property
    def with_article(self) -> str:
        """``"an SGLang"``, ``"a vLLM"``: for one-line refusals."""
        return f"{self.article} {self.display}"

    def answers(self, claim_id: str) -> bool:
        """Whether this engine has a verdict for ``claim_id`` (the others are ``n/a`` in its column)."""
        return self.claims is None or claim_id in self.claims


ENGINES: dict[str, EngineFacts] = {
    "sglang": EngineFacts(
        name="sglang",
        display="SGLang",
        article="an",
        label="SGLANG",
        first_release="0.5.17",  # the first release with a Kimi-K3 processor (semantics §12.2)
        example_release="0.5.23",
        claims=None,
        suite="claims",
        sources="deferlab.impl.sglang.sources",
        load_check="deferlab.impl.sglang.sources:load",
        driver="deferlab.impl.sglang.driver:SGLangImpl",
        column_prefix="",
    ),
    "vllm": EngineFacts(
        name="vllm",
        display="vLLM",
        article="a",
        label="VLLM",
        first_release="0.27.0",  # the first release with a Kimi-K3 image path (semantics §16.1)
        example_release="0.33.0",
        # served vs trained, and device-finished vs host-finished; C1-C12 are about SGLang's PR (semantics §16.2, §18)
        claims=("C4", "C13", "C14", "C15"),
        suite="claims",
        sources="deferlab.impl.vllm.sources",
        load_check="deferlab.impl.vllm.driver:VLLMPath",  # the driver built on the tree: what serving needs
        driver="deferlab.impl.vllm.driver:VLLMPath",
        column_prefix="vllm-",
    ),
}
LABELS = {name: facts.label for name, facts in ENGINES.items()}


def engine(name: str) -> EngineFacts:
    """The facts of engine ``name``; `DeferlabInputError` naming the accepted ones."""
    try:
        return ENGINES[str(name).lower()]
    except KeyError:
        raise DeferlabInputError(f"unknown engine {name!r}; accepted: {', '.join(ENGINES)}") from None


def engine_of_label(label: str) -> EngineFacts | None:
    """The engine whose verdicts are recorded under ``label`` (None: a modelled policy)."""
    return next((e for e in ENGINES.values() if e.label == label), None)


def path_label(engine_name: str, path: str | None = None, family: str = DEFAULT_FAMILY) -> str:
    """The verdict column of ``engine_name``'s served ``path`` for ``family``: the engine's label for the default
    path (None) and family, else prefixed ``FAMILY:`` and followed by the path (``qwen3-vl:VLLM host-normalized``):
    a non-default serving setting, and another model family, are columns of their own."""
    label = engine(engine_name).label
    return family_column(label if not path else f"{label} {path}", family)


def family_column(label: str, family: str = DEFAULT_FAMILY) -> str:
    """``label`` (an engine's label or a modelled policy) as the column of ``family``."""
    return label if family == DEFAULT_FAMILY else f"{family}:{label}"


def split_label(label: str) -> tuple[str, str, str | None]:
    """(family, engine label or policy, served path or None) of a verdict column (`path_label`'s inverse)."""
    family, _, rest = str(label).rpartition(":")
    head, _, path = rest.partition(" ")
    return (family or DEFAULT_FAMILY), head, (path or None)


# --- order ---------------------------------------------------------------------------------------------------------
def release_key(version: str) -> tuple[int, Version | str]:
    """Sort key of a release: PEP 440 order; anything that is not a version sorts after every release."""
    try:
        return (0, Version(str(version)))
    except InvalidVersion:
        return (1, str(version))


def is_release(version: str) -> bool:
    """Whether ``version`` is a PEP 440 version (a release name, not a path or ``installed``)."""
    return release_key(version)[0] == 0


def at_least(version: str, minimum: str) -> bool:
    """Whether release ``version`` is ``minimum`` or later (False for a non-version)."""
    return is_release(version) and release_key(version) >= release_key(minimum)


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


def column_key(name: str) -> tuple[int, tuple[int, Version | str]]:
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
            return [f"--{self.engine}", str(self.spec), *family]
        return (["--impl", self.impl] if self.impl else []) + family

    def answers(self, claim_id: str, family: str | None = None) -> bool:
        """Whether this system has a verdict for ``claim_id`` in the column of ``family`` (default its own): the
        engine's claim set, and for a family other than Kimi-K3 that family's claims (`reference.system.families`)."""
        family = family or self.family
        if family == ALL_FAMILIES:
            raise ValueError("answers: name the family of the column (this system runs every family)")
        if family != DEFAULT_FAMILY:
            from deferlab.reference.system.families import family as family_facts

            if claim_id not in family_facts(family).claims:
                return False
        return self.facts.answers(claim_id) if self.facts else True
