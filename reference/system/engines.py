"""The real engines deferlab runs, registered once: names, verdict labels, first releases, which claims each
answers, which checks it runs and which of deferlab's modules load and drive it.

Why a module of its own: the model families (`reference.system.families`) name engines and the systems under
test (`reference.system.systems`) pair an engine with a family; both import this, never the other way.
Module paths are strings (this room imports nothing of ``impl``): a caller that needs the code imports it.
A verdict column is an engine's label, followed by its served path where that is not the default
(``VLLM host-normalized``), prefixed ``FAMILY:`` for a model family but Kimi-K3 (`path_label`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from deferlab.reference.system.errors import DeferlabInputError
from deferlab.reference.system.releases import in_range

MODEL = "model"  # deferlab's own torch model: its columns are the modelled policies, not a label
DEFAULT_FAMILY = "kimi-k3"
ALL_FAMILIES = "all"  # --model all: every family of the registry, in one run of one engine
PATH_SCOPED = ("C13", "C14")  # the claims a served path may declare it does not answer (`Served.judges`)


@dataclass(frozen=True)
class Served:
    """One engine's path for a family over a range of releases (``low``..``high`` inclusive; ``high`` "" for
    every later release): its name, whether it is the engine's default serving setting, what of the engine
    runs (``code``: module paths), and why it is what it is (``note``). ``judges``: the geometry and pixel claims
    (C13, C14) the path answers where it declares them (its class's ``judged_claims``, semantics §18.9), so the
    families table can say a claim of the family is ``n/a`` on this path; None: its family's scope decides."""

    engine: str
    low: str
    high: str
    path: str
    default: bool
    code: tuple[str, ...]
    note: str = ""
    judges: tuple[str, ...] | None = None

    def claims(self, family_claims: tuple[str, ...]) -> tuple[str, ...]:
        """The family's claims this path is judged on: C13 and C14 only where ``judges`` names them."""
        if self.judges is None:
            return family_claims
        return tuple(c for c in family_claims if c not in PATH_SCOPED or c in self.judges)

    def covers(self, engine: str, version: str) -> bool:
        """Whether ``version`` of ``engine`` is in this range; a spec that is not a release (a checkout,
        ``installed``) is taken to be at least the newest release (what the engine's code says decides)."""
        return engine == self.engine and in_range(version, self.low, self.high)  # the one rule (releases.in_range)


@dataclass(frozen=True)
class EngineFacts:
    """One real engine: names, where its checks and drivers are, and which claims it answers.

    ``claims``: the claim ids it has verdicts for (None: every claim of ``claims.toml``); ``suite``: the part
    of the shipped checks it runs, relative to the ``properties`` folder; ``sources``: the module whose
    ``load(spec)`` installs one copy in a process; ``load_check``: ``module:callable`` a load check builds
    (the driver, where building it is what "loads" means); ``served``: the module whose ``paths(...)`` gives
    its served paths; ``column_prefix``: the prefix of its columns in a matrix (SGLang's are bare versions).
    ``distribution`` / ``package``: its name on the package index and its import package (default: ``name``;
    they may differ); ``order``: its place among the engines (columns, tables); ``plugin``: the entry point it came from.
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
    distribution: str = ""
    package: str = ""
    order: int = 100
    plugin: str = ""
    floor: str = "no path deferlab checks"  # why no release before ``first_release`` is run (one-line refusals)
    served: str = ""  # the module whose ``paths(source, family, settings)`` gives its FamilyPaths (no seam)
    seam: str = ""  # ``module:class`` of its seam implementation, where it has one (the seed's deferral claims)
    warm_fork: bool = False  # a mutation campaign may fork runs off a loaded server (`reports.mutate.fork`)
    serves: tuple[tuple[str, Served], ...] = ()  # (family, path) it declares itself (`reference.system.families`)
    # Requests as a client sends them (semantics §20): the module whose ``video_paths(source, family)`` gives its
    # `reference.system.video.VideoPath`s (none: no video path), and the one whose ``image_loaders(source)`` gives
    # its `ImageLoader`s of encoded bytes.
    video: str = ""
    image_bytes: str = ""
    # What deferlab's engine-free code asks of it, answered in its package so nothing tests its name (issue 29):
    # ``hooks``: the module with ``default_version()`` (the release a check loads), ``probed_modules()`` (what a
    # mutation campaign probes), ``table_paths(spec, family)`` / ``table_companions(names)`` (the report's skew
    # table), ``geometry_function(path, cfg)`` (C13's compiled sweep) and ``releases()`` (its releases, where they
    # are not on the package index: `reports.versions.matrix.index_versions`) where it has them, and for the
    # report's Kimi-K3 steps ``kimi_paths(spec, media_proc_cfg, checkpoint)``, ``kimi_load(spec)``,
    # ``kimi_geometry_function(path)`` and ``media_proc_defaults()`` (the reproducers' video keys); ``repro``:
    # ``module:attribute`` of its reproducers (a `reports.repro.engines.EngineRepro`; "" for none);
    # ``mutate_baseline``: the shipped mutation baseline is a sample of its campaign (the default of
    # ``--update-baseline``); ``anchor``: its checkout's own unit tests anchor a campaign (``--anchor``).
    hooks: str = ""
    repro: str = ""
    mutate_baseline: bool = False
    anchor: bool = False

    def __post_init__(self) -> None:
        for attr, default in (("distribution", self.name), ("package", self.name)):
            if not getattr(self, attr):
                object.__setattr__(self, attr, default)

    @property
    def option(self) -> str:
        """The command-line option naming a spec of it: ``--NAME`` (the pytest plugin reads the names off the entry
        points without importing a plugin, so the option is the name)."""
        return f"--{self.name}"

    @property
    def with_article(self) -> str:
        """``"an SGLang"``, ``"a vLLM"``: for one-line refusals."""
        return f"{self.article} {self.display}"

    def answers(self, claim_id: str) -> bool:
        """Whether this engine has a verdict for ``claim_id`` (the others are ``n/a`` in its column)."""
        return self.claims is None or claim_id in self.claims


# --- the registry: every engine is a plugin ------------------------------------------------------------------------
GROUP = "deferlab.engines"  # the entry point group: NAME = "module:attribute" naming an `EngineFacts`
# deferlab's own plugins, loaded from here too when deferlab runs without its installed metadata (a checkout on
# PYTHONPATH): the same entry points pyproject.toml declares.
BUILTIN = {
    "sglang": "deferlab.impl.sglang.plugin:ENGINE",
    "vllm": "deferlab.impl.vllm.plugin:ENGINE",
    "lmdeploy": "deferlab.impl.lmdeploy.plugin:ENGINE",
}
BROKEN: list[str] = []  # one line per plugin that could not be loaded (the CLI says each; the others still work)
CONFLICTS: list[str] = []  # one line per two plugins claiming one name or option (the CLI refuses to start)


def _entry_points() -> list[tuple[str, str, str]]:
    """(name, "module:attribute", distribution) of every ``deferlab.engines`` entry point, deferlab's own first."""
    from importlib.metadata import entry_points

    found = {name: (name, target, "deferlab") for name, target in BUILTIN.items()}
    for ep in entry_points(group=GROUP):
        dist = getattr(getattr(ep, "dist", None), "name", None) or "?"
        if dist.lower() == "deferlab" and ep.name in BUILTIN:
            continue
        found[f"{ep.name}@{dist}"] = (ep.name, ep.value, dist)
    return list(found.values())


def _load_one(name: str, target: str, dist: str) -> EngineFacts | None:
    import importlib

    module, _, attr = target.partition(":")
    try:
        facts = getattr(importlib.import_module(module), attr)
    except Exception as e:  # noqa: BLE001 - a broken plugin is one line; the others still work
        BROKEN.append(f"engine plugin {name!r} (package {dist}, {target}): {type(e).__name__}: {e}".splitlines()[0])
        return None
    if not isinstance(facts, EngineFacts):
        BROKEN.append(
            f"engine plugin {name!r} (package {dist}, {target}): not an EngineFacts but {type(facts).__name__}"
        )
        return None
    if facts.name != name:
        BROKEN.append(f"engine plugin {name!r} (package {dist}, {target}): its EngineFacts is named {facts.name!r}")
        return None
    return replace(facts, plugin=f"{target} ({dist})")


def load_registry() -> dict[str, EngineFacts]:
    """Every engine plugin, in ``order``; broken ones in `BROKEN`, clashes (one name, so one option, label or column
    prefix claimed twice) in `CONFLICTS` with the first one kept."""
    BROKEN.clear()
    CONFLICTS.clear()
    loaded = [f for f in (_load_one(*ep) for ep in _entry_points()) if f is not None]
    found: dict[str, EngineFacts] = {}
    for facts in sorted(loaded, key=lambda f: (f.order, f.name)):
        for other in found.values():
            clash = next(
                (a for a in ("option", "label", "column_prefix") if getattr(facts, a) == getattr(other, a)), None
            )
            if clash is not None:
                CONFLICTS.append(
                    f"engine plugins {other.plugin} and {facts.plugin} both claim the {clash} "
                    f"{getattr(facts, clash)!r}; accepted: one plugin per {clash} (uninstall one of them)"
                )
                break
        else:
            found[facts.name] = facts
    return found


def check_registry() -> None:
    """Raise `DeferlabInputError` (one line) when two plugins clash: a command refuses to start (exit 2)."""
    if CONFLICTS:
        raise DeferlabInputError(CONFLICTS[0])


ENGINES: dict[str, EngineFacts] = load_registry()
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
