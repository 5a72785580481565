"""Which engine functions each claim exercises: the default targets of a mutation campaign, read from the
provenance its verdicts record, and per mutant the claims worth running, read from probes.

Why two sources: a verdict's provenance names, per seam method its test
called, the engine function behind it ("real: sglang.srt.multimodal.processors.kimi_k25.navit_resize_config",
"KimiK3ImageProcessor._should_defer_gpu_preprocessing, called by its own
call site: ..."): those entry points, resolved against the engine's own files
(`CodeIndex`), are the campaign's default targets; only the engine's own code is
ever one (a companion's names, transformers' or torchvision's, are left out). Which helpers they run is a
dynamic fact (a static walk of the names a body mentions reached everything
from everything), so the reference run gives every function of the driver's
modules a probe (`instrument`) and runs each claim test alone in its process
(the driver caches processors and served outputs across tests, so a shared
session would credit one test with another's calls); the probes it hit are the
functions that claim entered (a pytest plugin: ``-p deferlab.properties.probes``
with ``DEFERLAB_MUTATE_PROBES`` set). A mutant then runs the claims that
entered its function; one at module level, in a function no claim entered, or
beside a claim with no probe record, runs every claim: provenance cannot say.

The unit of selection is every test the suite runs on real code, not only the
claim tests: a claim test is keyed by its claim (``C12``), any other property
(one marked ``real_code``) by its test function (``P:test_compositing_equals_the_oracle``,
its parametrized nodes together; `unit_of_node`). A property unit records no
verdict; it names no function in provenance, so it adds no default target,
but its probes select it like a claim's.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deferlab.reference.system.claims import claim_of_node as registry_claim_of_node
from deferlab.reference.system.signatures import signature_set
from deferlab.reference.system.systems import claim_key
from deferlab.reports.mutate.engine import Function, functions

_TOKEN = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
_CAMEL = re.compile(r"^_?[A-Z][a-z0-9]+[A-Z]")


# The companion libraries a family path computes with (`impl.loader.companions`): their names in provenance are
# never an engine function (a campaign mutates only the engine's own code).
FOREIGN = re.compile(r"\b(?:transformers|torchvision)(?:\.\w+)+(?: \([^)]*\))?(?:\.\w+)*")


def family_modules(engine: str, family: str) -> list[str]:
    """The engine code each model family of ``family`` (``--model``: one, a list, ``all``) is served with on
    ``engine``, as the registry names it (`reference.system.families.Served.code`: modules, or functions of one):
    probed beside the driver's modules, so a family path's functions are selected like Kimi-K3's. None for
    Kimi-K3 alone (the driver's modules are its path)."""
    from deferlab.reference.system.families import FAMILIES
    from deferlab.reference.system.systems import DEFAULT_FAMILY
    from deferlab.reports.core.sides import selected_families

    if family == DEFAULT_FAMILY:
        return []
    code = [c for f in selected_families(family) for s in FAMILIES[f].served if s.engine == engine for c in s.code]
    return list(dict.fromkeys(c for c in code if c.startswith(f"{engine}.")))


def probed_modules(engine: str) -> list[str]:
    """The engine modules whose functions get probes in the reference run: those the engine's driver runs, as its
    plugin names them (``hooks.probed_modules``). SGLang: the loader's required, optional and whitelist modules and
    the kernel package its normalization calls; vLLM: the input parser, ``convert_image_mode``'s module, the
    Kimi-K3 path and processor, and the served image processor's module."""
    import importlib

    from deferlab.reference.system.engines import engine as engine_facts

    return list(importlib.import_module(engine_facts(engine).hooks).probed_modules())


@dataclass
class CodeIndex:
    """Every function of the indexed modules of one tree, found by qualname and by name."""

    root: Path
    files: dict[str, str] = field(default_factory=dict)  # module -> file (relative, posix)
    funcs: dict[str, Function] = field(default_factory=dict)  # key (file:qualname) -> Function
    by_name: dict[str, set[str]] = field(default_factory=dict)  # last name component -> keys
    package: str = "sglang"  # dotted names starting with it are resolved against the tree's own files

    @classmethod
    def build(cls, root: Path, modules: Iterable[str], package: str = "sglang") -> CodeIndex:
        index = cls(Path(root), package=package)
        for module in modules:  # a function's path (``pkg.mod.Class.method``) indexes its module
            parts = module.split(".")
            next((i for i in range(len(parts), 1, -1) if index.add_module(".".join(parts[:i]))), None)
        return index

    def module_file(self, module: str) -> str | None:
        base = module.replace(".", "/")
        for rel in (f"{base}.py", f"{base}/__init__.py"):
            if (self.root / rel).is_file():
                return rel
        return None

    def add_module(self, module: str) -> list[str]:
        """Index ``module`` (and, for a package, the modules directly inside it); the files indexed."""
        rel = self.module_file(module)
        if rel is None:
            return []
        files = [rel]
        if rel.endswith("/__init__.py"):
            files += sorted(p.relative_to(self.root).as_posix() for p in (self.root / rel).parent.glob("*.py"))
        for f in dict.fromkeys(files):
            self.add_file(f)
        return files

    def add_file(self, rel: str) -> None:
        """Index the functions of one file (relative to the root); a file already indexed is left alone."""
        if rel in self.files.values() or not (self.root / rel).is_file():
            return
        self.files[rel.removesuffix("/__init__.py").removesuffix(".py").replace("/", ".")] = rel
        try:
            found = functions(rel, (self.root / rel).read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            return
        for fn in found:
            self.funcs[fn.key] = fn
            self.by_name.setdefault(fn.name, set()).add(fn.key)

    def resolve(self, text: str) -> set[str]:
        """The functions ``text`` names: ``sglang.module.func`` (``vllm.`` for a vLLM tree), ``Class.method`` or a distinctive bare name (an
        underscore, camel case or a call's parenthesis: plain English words are not names); a class's name alone names none of its
        methods, and a name followed by "patched" is the driver's replacement, not the engine's code."""
        named: set[str] = set()
        text = FOREIGN.sub(" ", text)  # a companion's names (transformers, torchvision) are not the engine's
        for m in _TOKEN.finditer(text):
            tok = m.group(0).rstrip(".")
            if text[m.end() :].startswith(" patched"):
                continue
            call = text[m.end() : m.end() + 1] == "("
            parts = tok.split(".")
            if parts[0] == self.package:
                for i in range(len(parts) - 1, 1, -1):
                    files = self.add_module(".".join(parts[:i]))
                    if files:
                        qual = ".".join(parts[i:])
                        named |= {k for k, f in self.funcs.items() if f.file in files and f.qualname == qual}
                        break
                continue
            for k in range(len(parts)):  # Class.method, then shorter suffixes (kimi_k25.func -> func)
                sub = parts[k:]
                if len(sub) == 1 and not (call or "_" in sub[0] or _CAMEL.match(sub[0])):
                    break
                hit = {
                    key
                    for key in self.by_name.get(sub[-1], ())
                    if self.funcs[key].qualname.split(".")[-len(sub) :] == sub
                }
                if hit:
                    named |= hit
                    break
        return named


@dataclass
class Reach:
    """One claim: the functions its provenance names and those its test entered (None: no trace recorded)."""

    claim: str
    named: set[str]
    called: set[str] | None
    unresolved: list[str] = field(default_factory=list)  # provenance lines naming no indexed function

    @property
    def can_say(self) -> bool:
        return self.called is not None


def named_functions(rows: Iterable[Mapping], index: CodeIndex) -> dict[str, tuple[set[str], list[str]]]:
    """Per claim row of a verdicts document: the functions its provenance names, and the lines that claim
    real code but name none."""
    out: dict[str, tuple[set[str], list[str]]] = {}
    for row in rows:
        named: set[str] = set()
        unresolved = []
        for method, text in (row.get("provenance") or {}).items():
            found = index.resolve(str(text))
            named |= found
            if not found and not str(text).startswith(("modelled", "absent")):
                unresolved.append(f"{method}: {text}")
        have = out.get(str(row["id"]), (set(), []))
        out[str(row["id"])] = (have[0] | named, have[1] + unresolved)
    return out


def claims_for(function_key: str | None, reach: Mapping[str, Reach]) -> list[str] | None:
    """The units (claims and properties) whose test entered ``function_key``, plus those with no trace; None
    (every unit) for a mutant outside any function or in one no trace holds."""
    if function_key is None:
        return None
    hit = [c for c, r in reach.items() if r.called is not None and function_key in r.called]
    if not hit:
        return None
    return sorted({*hit, *(c for c, r in reach.items() if not r.can_say)}, key=claim_key)


def claim_of_node(node: str) -> str | None:
    """The claim a test node id checks (``...::test_claim_c12_alpha_semantics[SGLANG]``): the one whose claims.toml
    ``property`` it is, else the one its name carries (`reference.system.claims.claim_of_node`)."""
    return registry_claim_of_node(node)


PROPERTY = "P:"  # a property unit's prefix: P:<test function>


def unit_of_node(node: str) -> str:
    """A node's unit of selection: its claim for a claim test, else ``P:<test function>`` (parameters and
    module dropped: ``.../test_stages.py::test_compositing_equals_the_oracle[cpu]`` is
    ``P:test_compositing_equals_the_oracle``)."""
    cid = claim_of_node(node)
    if cid is not None:
        return cid
    return PROPERTY + node.rsplit("::", 1)[-1].split("[", 1)[0]


def is_property(unit: str) -> bool:
    return unit.startswith(PROPERTY)


def nodes_by_unit(test_names: Iterable[str]) -> dict[str, list[str]]:
    """unit -> its node ids (claims and properties), in the order given."""
    out: dict[str, list[str]] = {}
    for name in test_names:
        out.setdefault(unit_of_node(name), []).append(name)
    return out


def nodes_by_claim(test_names: Iterable[str]) -> dict[str, list[str]]:
    """claim -> the node ids of its tests (claim tests only; `nodes_by_unit` keeps the properties too)."""
    return {u: n for u, n in nodes_by_unit(test_names).items() if not is_property(u)}


def signature_of(row: Mapping[str, Any]) -> str:
    """How a recorded claim row fails (as `properties.probes.signature_of` sees it under ``--first-kill``): ""
    unless it fails (or holds with a caveat); else its signature set (the recorded one, or its evidence's
    `failure_signature`), sorted and joined."""
    if row.get("verdict") not in ("fails", "holds-with-caveat"):
        return ""
    return " | ".join(sorted(signature_set({**row, "verdict": "fails"})))


# --- the call probes (what the reference run's claim tests entered) -----------------------------------------------
PROBE = "__deferlab_probe__"  # `properties.probes.PROBE`: the builtin the probes call, no module defines it


def instrument(source: str, file: str, first_id: int) -> tuple[str, dict[int, str]] | None:
    """``source`` with ``__deferlab_probe__(N)`` as the first statement of every function body (after its
    docstring), and N -> function key; None when the result would not compile.

    Why probes and not `sys.settrace`: a trace function runs on every Python call of the process (the reference
    took five times as long); a probe runs only when an engine function of an instrumented file does. A function
    a JIT compiles (``@njit``, ``@numba.jit(...)``, ``@torch.jit.script``: vLLM's fused patch writer) gets none,
    nor does anything nested in it: the compiler cannot call a Python builtin, so a probe would break the very
    run it records; its mutants run every claim (no trace can say)."""
    lines = source.splitlines(keepends=True)
    edits: list[tuple[int, int, str, bool]] = []  # line (0-based), column, text, whether it is a line of its own
    ids: dict[int, str] = {}
    defs = {
        (min([d.lineno for d in node.decorator_list] + [node.lineno]), node.end_lineno): node
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    compiled = [span for span, node in defs.items() if any(_is_jit(d) for d in node.decorator_list)]
    for fn in functions(file, source):
        node = defs.get((fn.start, fn.end))
        if node is None or any(lo <= fn.start and fn.end <= hi for lo, hi in compiled):
            continue
        n = first_id + len(ids)
        ids[n] = fn.key
        body = node.body
        doc = isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant)
        at = body[1] if doc and len(body) > 1 else (None if doc else body[0])
        if at is None:  # a docstring alone: the probe goes after it
            edits.append((body[0].end_lineno - 1, body[0].end_col_offset or 0, f"; {PROBE}({n})", False))
            continue
        line = lines[at.lineno - 1]
        if line[: at.col_offset].strip():
            edits.append((at.lineno - 1, at.col_offset, f"{PROBE}({n}); ", False))
        else:
            edits.append((at.lineno - 1, 0, f"{line[: at.col_offset]}{PROBE}({n})\n", True))
    for row, col, text, own in sorted(edits, reverse=True):
        lines[row] = text + lines[row] if own else lines[row][:col] + text + lines[row][col:]
    out = "".join(lines)
    try:
        compile(out, file, "exec")
    except SyntaxError:
        return None
    return out, ids


def _is_jit(decorator: ast.expr) -> bool:
    """Whether a decorator compiles its function: its called name (``njit``, ``numba.jit``, ``torch.jit.script``,
    with or without arguments) mentions ``jit``."""
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return "jit" in ast.unparse(target).lower()


def probes(root: Path, files: list[str]) -> dict[str, tuple[str, dict[int, str]]]:
    """Each file's instrumented text and probe ids (numbered across files); a file that cannot be is left out."""
    out: dict[str, tuple[str, dict[int, str]]] = {}
    n = 0
    for file in sorted(set(files)):
        made = instrument((root / file).read_text(encoding="utf-8"), file, n)
        if made is not None:
            out[file] = made
            n += len(made[1])
    return out
