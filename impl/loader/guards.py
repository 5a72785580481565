"""Which import statements of an engine file are guarded (inside ``try ... except ImportError``), read from its text.

Why a module of its own: the importer decides at run time whether a missing module gets a stand-in (rule 3 of
`importer`: only where the engine imports it unguarded); that answer is a static reading of the engine's file,
its AST parsed once per file and kept on disk by the file's bytes (`bytecode.lines_for`), and needs nothing of
the import machinery.
"""

from __future__ import annotations

import ast
import linecache
from functools import lru_cache
from pathlib import Path

from deferlab.impl.loader import bytecode

_IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


@lru_cache(maxsize=4096)
def _import_lines(path: str) -> dict[int, bool]:
    """Line -> guarded? for every import statement of an engine file (guarded: inside try/except ImportError);
    kept on disk by the file's bytes (`bytecode.lines_for`)."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return {}
    return bytecode.lines_for(data, lambda: _scan_import_lines(data))


def _scan_import_lines(data: bytes) -> dict[int, bool]:
    try:
        tree = ast.parse(data.decode("utf-8", errors="replace"))
    except (SyntaxError, ValueError):
        return {}
    lines: dict[int, bool] = {}

    def handler_catches(handler: ast.ExceptHandler) -> bool:
        if handler.type is None:
            return True
        names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        for n in names:
            ident = n.attr if isinstance(n, ast.Attribute) else getattr(n, "id", None)
            if ident in _IMPORT_ERRORS:
                return True
        return False

    def visit(node: ast.AST, guarded: bool) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for line in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                lines[line] = guarded
            return
        if isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            catches = any(handler_catches(h) for h in node.handlers)  # type: ignore[attr-defined]
            for child in node.body:  # type: ignore[attr-defined]
                visit(child, guarded or catches)
            for part in ("handlers", "orelse", "finalbody"):
                for child in getattr(node, part):
                    visit(child, guarded)
            return
        for child in ast.iter_child_nodes(node):
            visit(child, guarded)

    visit(tree, False)
    return lines


def guarded(path: str, line: int) -> bool | None:
    """Is line ``line`` of ``path`` an import statement, and is it inside ``try ... except ImportError``?

    A statement starting in column 0 is a module-level import, never inside a ``try``: answered from the
    text. Anything else is answered from the file's AST (parsed once per file).
    """
    text = linecache.getline(path, line)
    stripped = text.lstrip()
    if text and stripped.startswith(("import ", "from ")) and len(text) == len(stripped):
        return False
    return _import_lines(path).get(line)
