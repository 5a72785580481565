"""deferlab's import graph, read from the source (module- and function-level imports, not ``TYPE_CHECKING`` ones).

Why static: a cycle or a layering break that only a rarely taken branch
triggers is still a cycle; reading every ``import`` statement finds it
without running anything. `test_layering` states the rules over this graph.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

TOPS = ("reference", "impl", "sim", "reports", "properties")
PREFIX = "deferlab."


@dataclass
class Graph:
    """``edges[m]``: the deferlab modules ``m`` imports; ``external[m]``: the top-level names of the rest."""

    modules: dict[str, Path] = field(default_factory=dict)
    edges: dict[str, set[str]] = field(default_factory=dict)
    external: dict[str, set[str]] = field(default_factory=dict)
    bare: dict[str, set[str]] = field(default_factory=dict)  # ours, imported without the deferlab prefix


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return PREFIX + ".".join(parts)


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            inside.update(id(sub) for sub in ast.walk(node))
    return inside


def _imported(node: ast.AST, package: str) -> Iterable[str]:
    if isinstance(node, ast.Import):
        yield from (a.name for a in node.names)
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            up = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join([*up, base] if base else up)
        yield base
        yield from (f"{base}.{a.name}" for a in node.names)


def build(root: Path, files: Iterable[Path] | None = None) -> Graph:
    """The graph of every ``*.py`` under ``root``'s five folders (or of ``files``)."""
    paths = list(files) if files is not None else [p for top in TOPS for p in sorted((root / top).rglob("*.py"))]
    g = Graph()
    for p in paths:
        g.modules[module_name(root, p)] = p
    for name, p in g.modules.items():
        package = name if p.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(p.read_text(encoding="utf-8"), filename=str(p))
        skip = _type_checking_nodes(tree)
        g.edges[name], g.external[name], g.bare[name] = set(), set(), set()
        for node in ast.walk(tree):
            if id(node) in skip or not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for target in _imported(node, package):
                if not target:
                    continue
                if target.split(".")[0] in TOPS:
                    g.bare[name].add(target)
                    continue
                if target == "deferlab" or target.startswith(PREFIX):
                    hit = resolve(g.modules, target)
                    if hit and hit != name:
                        g.edges[name].add(hit)
                else:
                    g.external[name].add(target.split(".")[0])
    return g


def resolve(modules: dict[str, Path], target: str) -> str | None:
    """The deferlab module an import of ``target`` loads last (``a.b.c`` of ``from a.b import c`` if a module)."""
    while target:
        if target in modules:
            return target
        target = target.rpartition(".")[0]
    return None


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out
