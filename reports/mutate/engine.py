"""Mutants of an engine's own code: which functions exist, which mutations cosmic-ray's operators make in them,
a fixed-seed sample, and the tree copy each mutant lives in.

Why cosmic-ray's operators and not our own: a mutation campaign measures the
claims, so the mutants must come from an engine of record (operators flipped,
constants moved, conditions negated, decorators and loop bodies dropped), not
from what deferlab's authors think of. We call each operator's own
``mutation_positions(node)`` / ``mutate(node, index)`` on the parso tree, as
cosmic-ray's ``MutationVisitor`` does, but walk only the target functions'
lines (the visitor walks the whole module once per operator). Operators that
need arguments (``VariableReplacer``/``VariableInserter``: a random constant)
are left out, so a mutant id always names the same mutation.

A mutant never touches the tree it came from: `WorkTree` hard-links (or copies)
the package once per worker and swaps the one mutated file by renaming a new
file over the link, so the original inode is never opened for writing.
"""

from __future__ import annotations

import ast
import difflib
import os
import pickle
import random
import re
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deferlab.reference.system.errors import UsageError

MUTANT_ID = re.compile(
    r"^(?P<file>[^:]+\.py):(?P<line>\d+):(?P<col>\d+):(?P<op>[A-Za-z_]\w*):(?P<index>\d+)(?::(?P<nth>\d+))?$"
)


@dataclass(frozen=True)
class Function:
    """One ``def`` of a file: its dotted qualname (``Class.method``, ``outer.inner``) and lines (decorators
    included)."""

    file: str  # relative to the tree root, posix: sglang/srt/multimodal/processors/kimi_k25.py
    qualname: str
    start: int
    end: int

    @property
    def key(self) -> str:
        return f"{self.file}:{self.qualname}"

    @property
    def name(self) -> str:
        return self.qualname.rsplit(".", 1)[-1]


@dataclass(frozen=True)
class Target:
    """What to mutate: a file's whole text (``function`` None) or one function's lines."""

    file: str
    function: str | None
    start: int
    end: int

    @property
    def label(self) -> str:
        return f"{self.file}:{self.function}" if self.function else self.file


@dataclass(frozen=True)
class Mutant:
    """One (operator, position) inside a target: enough to make it again from the file (`mutated_source`)."""

    file: str
    function: str | None  # innermost function holding it (None: module level or a class body)
    line: int
    col: int
    operator: str  # cosmic-ray's name, e.g. core/ReplaceComparisonOperator_Lt_LtE
    node: tuple[int, int, int, int]  # the parso node the operator mutates: start line, col, end line, col
    nth: int  # which of the nodes with that span and the operator's positions (0 almost always)
    index: int  # the operator's position index within the node

    @property
    def id(self) -> str:
        op = self.operator.removeprefix("core/")
        return f"{self.file}:{self.line}:{self.col}:{op}:{self.index}" + (f":{self.nth}" if self.nth else "")


# --- the code index ------------------------------------------------------------------------------------------------
def functions(file: str, source: str) -> list[Function]:
    """Every function and method of ``source`` (nested ones too), outermost first."""
    out: list[Function] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                qual = f"{prefix}{child.name}"
                start = min([d.lineno for d in child.decorator_list] + [child.lineno])
                out.append(Function(file, qual, start, child.end_lineno or child.lineno))
                visit(child, qual + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return out


def innermost(funcs: list[Function], line: int) -> Function | None:
    """The innermost function whose lines hold ``line``."""
    holding = [f for f in funcs if f.start <= line <= f.end]
    return max(holding, key=lambda f: f.start, default=None)


# --- targets -------------------------------------------------------------------------------------------------------
def normalize_file(root: Path, text: str, package: str = "sglang") -> str:
    """A ``--target`` file as a path relative to the tree root: ``sglang/a/b.py``, ``python/sglang/a/b.py``,
    ``a/b.py`` (inside the package) or the dotted module ``sglang.a.b``; UsageError naming what exists."""
    raw = text.strip().removeprefix("./").removeprefix("python/")
    candidates = [raw, f"{package}/{raw}"]
    if raw.endswith(".py") is False and "/" not in raw:
        candidates += [raw.replace(".", "/") + ".py", raw.replace(".", "/") + "/__init__.py"]
    for rel in candidates:
        if (root / rel).is_file() and rel.endswith(".py"):
            return Path(rel).as_posix()
    raise UsageError(
        f"--target {text!r}: no such Python file in the {package} tree at {root} "
        f"(give a path like {package}/srt/multimodal/processors/kimi_k25.py, or the dotted module)"
    )


def parse_target(root: Path, spec: str, package: str = "sglang") -> Target:
    """``FILE[:FUNCTION]`` as a `Target` (FUNCTION: a qualname, or a name the file defines once)."""
    file_part, _, func = spec.partition(":")
    rel = normalize_file(root, file_part, package)
    source = (root / rel).read_text(encoding="utf-8")
    if not func.strip():
        return Target(rel, None, 1, len(source.splitlines()) or 1)
    funcs = functions(rel, source)
    found = [f for f in funcs if f.qualname == func.strip()] or [f for f in funcs if f.name == func.strip()]
    if len(found) != 1:
        names = sorted(f.qualname for f in funcs if "." not in f.qualname or f.qualname.count(".") == 1)
        why = f"{len(found)} functions are named {func.strip()!r} ({', '.join(f.qualname for f in found)}); give the qualname"
        if not found:
            shown = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "")
            why = f"{rel} defines no function {func.strip()!r} (it defines {shown})"
        raise UsageError(f"--target {spec!r}: {why}")
    f = found[0]
    return Target(rel, f.qualname, f.start, f.end)


def function_target(f: Function) -> Target:
    return Target(f.file, f.qualname, f.start, f.end)


# --- mutants -------------------------------------------------------------------------------------------------------
def operator_names() -> list[str]:
    """cosmic-ray's core operators that take no arguments (deterministic mutations), sorted."""
    from cosmic_ray.plugins import get_operator, operator_names

    return sorted(n for n in operator_names() if n.startswith("core/") and not get_operator(n).arguments())


def _operators(names: list[str]) -> list[tuple[str, object]]:
    from cosmic_ray.plugins import get_operator

    return [(n, get_operator(n)()) for n in names]


def _walk(node: object, lo: int, hi: int) -> Iterator[Any]:
    """Pre-order parso nodes whose lines meet [lo, hi] (cosmic-ray's visitor order, pruned to the lines)."""
    yield node
    for child in getattr(node, "children", ()):
        if child.end_pos[0] >= lo and child.start_pos[0] <= hi:
            yield from _walk(child, lo, hi)


def _span(node: object) -> tuple[int, int, int, int]:
    return (*node.start_pos, *node.end_pos)  # type: ignore[attr-defined]


def mutants_in(root: Path, target: Target, operators: list[str] | None = None) -> list[Mutant]:
    """Every (operator, position) cosmic-ray's operators give inside ``target``'s lines (one pruned walk)."""
    import parso

    source = (root / target.file).read_text(encoding="utf-8")
    funcs = functions(target.file, source)
    ops = _operators(operators or operator_names())
    seen: dict[tuple[str, tuple[int, int, int, int]], int] = {}
    out: list[Mutant] = []
    for node in _walk(parso.parse(source), target.start, target.end):
        span = _span(node)
        for name, op in ops:
            positions = list(op.mutation_positions(node))  # type: ignore[attr-defined]
            if not positions:
                continue
            nth = seen.get((name, span), 0)
            seen[(name, span)] = nth + 1
            for index, ((line, col), _) in enumerate(positions):
                if target.start <= line <= target.end:
                    holder = innermost(funcs, line)
                    out.append(
                        Mutant(target.file, holder.qualname if holder else None, line, col, name, span, nth, index)
                    )
    return out


class Sources:
    """The original text of each file and its parso tree, pickled: a mutant starts from a fresh copy of the tree
    (unpickling is 2-10x faster than parsing again), since an operator edits the tree in place."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._text: dict[str, str] = {}
        self._tree: dict[str, bytes] = {}

    def text(self, file: str) -> str:
        if file not in self._text:
            self._text[file] = (self.root / file).read_text(encoding="utf-8")
        return self._text[file]

    def fresh_tree(self, file: str) -> object:
        import parso

        if file not in self._tree:
            self._tree[file] = pickle.dumps(parso.parse(self.text(file)))
        return pickle.loads(self._tree[file])

    def mutated(self, mutant: Mutant) -> str | None:
        """The file with ``mutant`` applied by its operator's own ``mutate`` (as cosmic-ray's visitor applies it);
        None when that changes nothing, the result does not compile, or the operator cannot apply itself to the node
        it offered (cosmic-ray's "incompetent"; its ExceptionReplacer raises AttributeError on an ``except (A, B)``
        tuple in vLLM 0.34.0's ``multimodal/media/image.py``): one mutant is never a reason to stop the campaign."""
        from cosmic_ray.plugins import get_operator

        op = get_operator(mutant.operator)()
        tree = self.fresh_tree(mutant.file)
        count = 0
        for node in _walk(tree, mutant.node[0], mutant.node[2]):
            if _span(node) != mutant.node or not list(op.mutation_positions(node)):
                continue
            if count < mutant.nth:
                count += 1
                continue
            parent = node.parent
            try:
                new = op.mutate(node, mutant.index)
            except (AttributeError, IndexError, TypeError, ValueError):
                return None
            if parent is not None and new is not node:
                i = parent.children.index(node)
                if new is None:
                    del parent.children[i]
                else:
                    parent.children[i] = new
                    new.parent = parent
            code = tree.get_code()  # type: ignore[attr-defined]
            return code if code != self.text(mutant.file) and _compiles(code, mutant.file) else None
        return None


def _compiles(code: str, file: str) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SyntaxWarnings of the engine's own code are not ours to print
        try:
            compile(code, file, "exec")
        except (SyntaxError, ValueError):
            return False
    return True


def population(root: Path, targets: list[Target], operators: list[str] | None = None) -> list[Mutant]:
    """Every mutant of every target (one in two overlapping targets once), in id order."""
    by_id: dict[str, Mutant] = {}
    for t in targets:
        for m in mutants_in(root, t, operators):
            by_id.setdefault(m.id, m)
    return sorted(by_id.values(), key=lambda m: m.id)


def sample(pool: list[Mutant], n: int, seed: int, sources: Sources) -> tuple[list[Mutant], int]:
    """A fixed-seed sample of ``n`` mutants that change the code and compile (all when fewer), in file and line
    order, and how many drawn ones were dropped as incompetent: a seeded shuffle, taken in order."""
    order = sorted(pool, key=lambda m: m.id)
    random.Random(seed).shuffle(order)
    chosen, dropped = [], 0
    for m in order:
        if len(chosen) >= n:
            break
        if sources.mutated(m) is None:
            dropped += 1
            continue
        chosen.append(m)
    return sorted(chosen, key=lambda m: (m.file, m.line, m.col, m.operator, m.index, m.nth)), dropped


def diff(source: str, mutated: str, file: str) -> str:
    """The unified diff of the one mutated file."""
    lines = difflib.unified_diff(source.splitlines(), mutated.splitlines(), f"a/{file}", f"b/{file}", lineterm="", n=2)
    return "\n".join(lines)


# --- the tree copy -------------------------------------------------------------------------------------------------
@dataclass
class WorkTree:
    """A private copy of ``source``'s package under ``path``: hard links where the filesystem allows, copies
    otherwise; a mutated file replaces its link by rename, and `restore` links the original back."""

    source: Path  # the folder holding the package (the loaded tree's root)
    path: Path
    package: str = "sglang"
    linked: bool = True
    swapped: set[str] = field(default_factory=set)

    @classmethod
    def make(cls, source: Path, parent: Path, package: str = "sglang") -> WorkTree:
        source = Path(source).resolve()
        path = Path(tempfile.mkdtemp(prefix="tree-", dir=parent)).resolve()
        if path == source or source in path.parents:
            raise ValueError(f"a work tree must not lie inside the tree it copies ({source})")
        tree = cls(source, path, package)
        for dirpath, dirnames, filenames in os.walk(source / package):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            rel = Path(dirpath).relative_to(source)
            (path / rel).mkdir(parents=True, exist_ok=True)
            for name in filenames:
                tree._place(source / rel / name, path / rel / name)
        for extra in ("pyproject.toml",):  # where a checkout states its version
            if (source / extra).is_file():
                shutil.copy2(source / extra, path / extra)
        return tree

    def _place(self, src: Path, dst: Path) -> None:
        if self.linked:
            try:
                os.link(src, dst)
                return
            except OSError:
                self.linked = False
        shutil.copy2(src, dst)

    def apply(self, file: str, text: str) -> None:
        """Put ``text`` at ``file``: a new file renamed over the link (never a write into the shared inode)."""
        dst = self.path / file
        fd, tmp = tempfile.mkstemp(prefix=f".{dst.name}.", suffix=".tmp", dir=dst.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, dst)
        self.swapped.add(file)

    def restore(self, file: str) -> None:
        """The original of ``file`` back in place (a fresh link or copy, renamed over the mutant)."""
        dst = self.path / file
        tmp = dst.with_name(f".{dst.name}.orig")
        tmp.unlink(missing_ok=True)
        self._place(self.source / file, tmp)
        os.replace(tmp, dst)
        self.swapped.discard(file)

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
