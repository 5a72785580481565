"""The real engines deferlab runs, registered once: names, verdict labels, first releases, which claims each
answers, which checks it runs and which of deferlab's modules load and drive it.

Why a module of its own: the model families (`reference.system.families`) name engines and the systems under
test (`reference.system.systems`) pair an engine with a family; both import this, never the other way.
Module paths are strings (this room imports nothing of ``impl``): a caller that needs the code imports it.
A verdict column is an engine's label, followed by its served path where that is not the default
(``VLLM host-normalized``), prefixed ``FAMILY:`` for a model family but Kimi-K3 (`path_label`).
"""

from __future__ import annotations

from dataclasses import dataclass

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
