"""No code branches on an engine's name or switches on a family's config type outside the plugin that owns it
(issue 29, items 1-2).

Why: an engine is a plugin (`reference.system.engines`) and a family an object (`reference.system.families`,
its config types in `reference.system.family_configs`). A comparison or membership test against an engine's
name (``engine == "vllm"``, ``kind in ("sglang", ...)``) outside ``impl/<engine>/`` and the registry, or an
``isinstance`` against a family config type outside the family modules, is a switch that a new engine or family
would have to find and extend by hand; what differs belongs in the plugin's facts or on the config type.

Read from the source with `ast`, so a rarely run branch counts; the scanner is checked on snippets that hold
such a branch (it can fail) and that do not (it does not fail on a default or a plain string).
"""

from __future__ import annotations

import ast
from pathlib import Path

import deferlab.reference
from deferlab.reference.system import engines, family_configs

ROOT = Path(deferlab.reference.__file__).resolve().parents[1]
SCANNED = ("reports", "properties", "reference", "sim", "impl")
NAMES = frozenset(engines.ENGINES)
CONFIG_TYPES = frozenset(t.__name__ for t in family_configs.CONFIG_TYPES)
# The owners: an engine's own package and the registry may name engines; the family modules may name config types.
ENGINE_OWNERS = (*(f"impl/{name}/" for name in sorted(NAMES)), "reference/system/engines.py")
FAMILY_OWNERS = ("reference/system/family_configs", "reference/system/families.py")


def _literals(node: ast.expr) -> list[str]:
    """The string constants ``node`` is or holds (a tuple, list or set display)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [v for elt in node.elts for v in _literals(elt)]
    return []


def _type_names(node: ast.expr) -> list[str]:
    """The class names an isinstance's second argument names (``A``, ``mod.A``, ``(A, B)``, ``A | B``)."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    if isinstance(node, ast.Tuple):
        return [n for elt in node.elts for n in _type_names(elt)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _type_names(node.left) + _type_names(node.right)
    return []


def switches(
    source: str,
    *,
    engine_names: frozenset[str] = NAMES,
    config_types: frozenset[str] = CONFIG_TYPES,
    engines_owned: bool = False,
    families_owned: bool = False,
) -> list[tuple[int, str]]:
    """(line, what) of every comparison or membership test against an engine name literal (unless
    ``engines_owned``) and every isinstance against a family config type (unless ``families_owned``)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and not engines_owned:
            named = {v for side in (node.left, *node.comparators) for v in _literals(side)} & engine_names
            if named:
                found.append((node.lineno, f"compares with engine name {', '.join(sorted(named))}"))
        elif isinstance(node, ast.match_case) and not engines_owned:
            named = {
                p.value.value
                for p in ast.walk(node.pattern)
                if isinstance(p, ast.MatchValue) and isinstance(p.value, ast.Constant)
            } & engine_names
            if named:
                found.append((node.pattern.lineno, f"matches engine name {', '.join(sorted(named))}"))
        elif (
            isinstance(node, ast.Call)
            and not families_owned
            and isinstance(node.func, ast.Name)
            and node.func.id in ("isinstance", "issubclass")
            and len(node.args) == 2
        ):
            named = set(_type_names(node.args[1])) & config_types
            if named:
                found.append((node.lineno, f"{node.func.id} on family config type {', '.join(sorted(named))}"))
    return found


def scan(root: Path = ROOT) -> list[str]:
    """``path:line: what`` of every switch in the shipped code (the packages of `SCANNED`), owners excepted."""
    out = []
    for top in SCANNED:
        for path in sorted((root / top).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            hits = switches(
                path.read_text(encoding="utf-8"),
                engines_owned=rel.startswith(ENGINE_OWNERS),
                families_owned=rel.startswith(FAMILY_OWNERS),
            )
            out += [f"{rel}:{line}: {what}" for line, what in hits]
    return out


def test_no_switch_on_an_engine_name_or_a_family_config_type() -> None:
    found = scan()
    assert found == [], f"{len(found)} switches outside their plugin:\n" + "\n".join(found)


def test_the_scanner_finds_each_form_of_switch() -> None:
    """Each form counts (so the test above can fail): equality, inequality, membership in a tuple or set, a match
    case, isinstance on one type, a tuple and a union, a qualified name."""
    snippet = """
if engine == "sglang": pass
if "vllm" != kind: pass
ok = name in ("lmdeploy", "other")
ok = name not in {"vllm"}
match engine:
    case "sglang": pass
if isinstance(cfg, QwenVLConfig): pass
if isinstance(cfg, InternVLConfig | NormConfig): pass
if isinstance(cfg, (fc.NormConfig, int)): pass
"""
    hits = switches(
        snippet,
        engine_names=frozenset({"sglang", "vllm", "lmdeploy"}),
        config_types=frozenset({"QwenVLConfig", "InternVLConfig", "NormConfig"}),
    )
    assert [line for line, _ in hits] == [2, 3, 4, 5, 7, 8, 9, 10], hits


def test_the_scanner_leaves_data_alone() -> None:
    """A default, a call argument, a plain string, a comparison with another string and an owner's switch are
    not switches."""
    snippet = """
def f(engine: str = "sglang") -> None:
    engine_facts("vllm")
    label = "lmdeploy is an engine"
    if engine == "other": pass
    if isinstance(cfg, dict): pass
"""
    names = frozenset({"sglang", "vllm", "lmdeploy"})
    assert switches(snippet, engine_names=names, config_types=frozenset({"NormConfig"})) == []
    assert switches('if e == "vllm": pass', engine_names=names, engines_owned=True) == []
    assert switches("isinstance(c, NormConfig)", config_types=frozenset({"NormConfig"}), families_owned=True) == []


def test_the_scan_reads_every_shipped_package() -> None:
    """The scan covers the tree (an empty walk would pass the first test), and the owners it leaves out exist."""
    files = [p for top in SCANNED for p in (ROOT / top).rglob("*.py")]
    assert len(files) > 200
    assert NAMES >= {"sglang", "vllm", "lmdeploy"} and len(CONFIG_TYPES) >= 3
    for owner in ENGINE_OWNERS:
        assert (ROOT / owner).exists(), owner


def test_every_engine_answers_through_its_plugin() -> None:
    """What replaced the switches is there for each registered engine: its ``hooks`` module answers the questions
    every engine is asked (a default release, the modules a campaign probes), its ``repro`` names an EngineRepro,
    and exactly the engines whose shipped baseline and anchor they are say so."""
    import importlib

    from deferlab.reports.repro.engines import NONE, EngineRepro, repro_of

    for name, facts in engines.ENGINES.items():
        hooks = importlib.import_module(facts.hooks)
        assert hooks.default_version()[0].isdigit(), name
        assert isinstance(hooks.probed_modules(), list), name
        assert isinstance(repro_of(name), EngineRepro) and (repro_of(name) is not NONE) == bool(facts.repro), name
    assert [n for n, f in engines.ENGINES.items() if f.mutate_baseline] == ["sglang"]
    assert [n for n, f in engines.ENGINES.items() if f.anchor] == ["sglang"]
