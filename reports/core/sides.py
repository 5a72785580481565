"""What a command names as the code to run: a SPEC (a release, ``installed``, a checkout, ``PATH@REV``), the claims
asked for, and the one line that refuses anything else; shared by ``versions``, ``compare`` and ``repro``.

Why before any load: loading an engine costs seconds (a child process, maybe a download), and a typo must not.
`resolve_side` reads a SPEC without importing anything: an existing path is a checkout, ``installed`` is the
engine importable here, a PEP 440 version is a release, ``PATH@REV`` is that git checkout at a revision
(extracted by ``git archive`` into ``<cache>/checkouts/<sha>``, the user's working tree and repository left
alone; a revision refused, because git cannot extract it or its tree holds no package of the engine, leaves
nothing in ``checkouts/``; ``deferlab cache`` lists those trees and ``prune --checkouts`` removes them);
anything else is refused at once (`UsageError`, one line). Whether a named release exists, or a
checkout loads, is the loader's answer (`reports.core.runner.check_loads`), asked next. Beside it, what the
four commands read the same way: ``--claims`` (`selected_claims`), ``--model`` (`selected_families`: the model
families a run judges, all in one engine load), the strict switch (`strict_switch`), and a run's outcome in
one line (`verdict_counts`, `run_error`).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deferlab.reference.system.claims import claim_of_node
from deferlab.reference.system.errors import DeferlabInputError, UsageError
from deferlab.reference.system.families import FAMILIES
from deferlab.reference.system.systems import ALL_FAMILIES, DEFAULT_FAMILY, System, engine, is_release, sorted_claims
from deferlab.reports.core import process


def accepted(engine_name: str = "sglang") -> str:
    """What a SPEC of ``engine_name`` may be, for the one-line refusals."""
    facts = engine(engine_name)
    return (
        f"accepted: a release such as {facts.example_release}, 'installed', {facts.with_article} checkout path, "
        "or PATH@REV (that git checkout at a commit, branch or tag)"
    )


@dataclass(frozen=True)
class Side:
    """One SPEC resolved: as given, what the loader gets (``run_spec``), and what makes it that code."""

    role: str  # "BASE" | "HEAD" | an option name ("--sglang")
    spec: str
    kind: str  # "release" | "installed" | "checkout" | "revision"
    run_spec: str
    identity: tuple[str, ...]
    revision: str | None = None  # PATH@REV: the commit REV names
    repo: str | None = None  # PATH@REV: the checkout's top level
    engine: str = "sglang"
    family: str = DEFAULT_FAMILY  # the model families its runs judge (`family_option`)

    @property
    def system(self) -> System:
        return System(self.engine, self.run_spec, family=self.family)


def _loader_engine(engine_name: str) -> Any:
    """The loader's description of ``engine_name`` (its package, where it sits in a checkout)."""
    import importlib

    return importlib.import_module(engine(engine_name).sources).ENGINE


def _git(args: list[str], cwd: Path) -> tuple[int | None, str, str]:
    try:
        return process.capture(["git", "-C", str(cwd), *args], timeout=120)
    except OSError as e:
        return 1, "", f"git could not run: {e}"


def _last(text: str) -> str:
    return (str(text).strip().splitlines() or [""])[-1].strip()


def resolve_side(role: str, spec: str, *, cache: Path | None = None, engine: str = "sglang") -> Side:
    """The `Side` ``spec`` names, or `UsageError` (one line, ``role`` first) for a SPEC that is none of the
    accepted forms, a missing path, or a revision that cannot be had; nothing is imported or loaded."""
    spec = str(spec).strip()
    ok = accepted(engine)
    if not spec:
        raise UsageError(f"{role}: an empty SPEC; {ok}")
    if spec == "installed":
        return Side(role, spec, "installed", spec, ("installed",), engine=engine)
    path = Path(spec).expanduser()
    if path.exists():
        return Side(role, spec, "checkout", str(path.resolve()), ("tree", _tree_key(path, engine)), engine=engine)
    if "@" in spec:
        left, rev = spec.rsplit("@", 1)
        if Path(left).expanduser().exists() or "/" in left or left.startswith((".", "~")):
            return _revision_side(role, spec, Path(left).expanduser(), rev, cache, engine)
    if is_release(spec):
        return Side(role, spec, "release", spec, ("release", spec), engine=engine)
    if "/" in spec or spec.startswith((".", "~")):
        raise UsageError(f"{role}: {engine} source {spec!r}: no such path; {ok}")
    raise UsageError(
        f"{role}: {engine} source {spec!r}: neither 'installed', an existing path, a version nor PATH@REV; {ok}"
    )


def _tree_key(path: Path, engine_name: str) -> str:
    """The folder holding the package for a checkout (so PATH and PATH/python are one tree); else PATH itself."""
    from deferlab.impl.loader.sources import checkout_root

    try:
        return str(checkout_root(_loader_engine(engine_name), str(path), path))
    except DeferlabInputError:
        return str(path.resolve())  # not a checkout: the load check refuses it in the loader's words


def _revision_side(role: str, spec: str, where: Path, rev: str, cache: Path | None, engine_name: str) -> Side:
    ok = accepted(engine_name)
    if not where.exists():
        raise UsageError(f"{role}: {spec!r}: no such path {str(where)!r}; {ok}")
    if not rev.strip():
        raise UsageError(f"{role}: {spec!r}: no revision after '@'; {ok}")
    rc, out, err = _git(["rev-parse", "--show-toplevel"], where if where.is_dir() else where.parent)
    if rc != 0:
        raise UsageError(f"{role}: {spec!r}: {str(where)!r} is not a git checkout ({_last(err) or rc}); {ok}")
    repo = Path(out.strip()).resolve()
    rc, out, _ = _git(["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], repo)
    sha = out.strip()
    if rc != 0 or not re.fullmatch(r"[0-9a-f]{40}", sha):
        raise UsageError(
            f"{role}: {spec!r}: unknown revision {rev!r} in the git checkout {str(repo)!r} "
            f"(git rev-parse --verify found no commit); accepted: a commit, branch or tag of that checkout"
        )
    rel = where.resolve().relative_to(repo).as_posix()
    loader = _loader_engine(engine_name)
    subdir = loader.checkout_subdir or ""
    cache = cache or checkouts_root()
    try:
        tree = extract_revision(repo, sha, rel, cache, subdir=subdir)
    except UsageError as e:
        raise UsageError(f"{role}: {spec!r}: {e}; {ok}") from None
    pkg = loader.package
    if not (tree.name == pkg or _there(tree / pkg) or (subdir and _there(tree / subdir / pkg))):
        _remove_empty(tree, cache, whole=True)  # never loadable as the engine: not kept
        raise UsageError(
            f"{role}: {spec!r}: commit {sha[:12]} holds no {pkg}/ package folder in {rel if rel != '.' else 'the top'}"
            f" of the git checkout {str(repo)!r}; {ok}"
        )
    return Side(role, spec, "revision", str(tree), ("revision", sha, rel), sha, str(repo), engine_name)


def _there(path: Path) -> bool:
    return path.exists() or path.is_symlink()


def _remove_empty(path: Path, cache: Path, *, whole: bool = False) -> None:
    """Remove ``path`` (all of it with ``whole``, else only if empty), then each parent up to and including
    ``cache`` that is left empty: what a refused revision made under the checkouts folder goes with it."""
    if whole:
        shutil.rmtree(path, ignore_errors=True)
    for folder in [path, *path.parents]:
        try:
            folder.rmdir()
        except FileNotFoundError:
            pass
        except OSError:
            break  # not empty: another tree, or a run under way
        if folder == cache or cache not in folder.parents:
            break


def checkouts_root() -> Path:
    """Where ``PATH@REV`` trees go: ``checkouts/`` beside the wheel cache (``DEFERLAB_CACHE`` moves both)."""
    from deferlab.impl.loader.wheels import deferlab_cache

    return deferlab_cache() / "checkouts"


def extract_revision(repo: Path, sha: str, rel: str, cache: Path, *, subdir: str = "python") -> Path:
    """``<cache>/<sha>/<sub>``: the tree of ``sub`` at ``sha`` (``rel/<subdir>`` where the commit has it: SGLang's
    ``python`` package folder; else ``rel``), from ``git archive``; extracted aside and renamed in, so it is
    whole or absent."""
    sub = rel if rel not in ("", ".") else ""
    python = (f"{sub}/{subdir}" if sub else subdir) if subdir else ""
    if python and _git(["cat-file", "-t", f"{sha}:{python}"], repo)[1].strip() == "tree":
        sub = python
    final = cache / sha / sub if sub else cache / sha / "tree"
    if final.is_dir():
        with contextlib.suppress(OSError):
            os.utime(cache / sha)  # last used (``deferlab cache prune --checkouts --older-than``)
        return final
    cache.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{sha[:12]}.partial-", dir=cache))
    done = False
    try:
        archive, tree = scratch / "archive.tar", scratch / "tree"
        tree.mkdir()
        rc, _, err = _git(["archive", "--format=tar", "-o", str(archive), sha, *([sub] if sub else [])], repo)
        if rc == 0:
            rc, _, err = process.capture(["tar", "-x", "-C", str(tree), "-f", str(archive)], timeout=600)
        if rc != 0:
            why = _last(err) or f"exit {rc}"
            raise UsageError(f"git archive of {sha[:12]}:{sub or '.'} in {str(repo)!r} failed ({why})")
        final.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(tree / sub if sub else tree, final)
        except OSError:
            if not final.is_dir():  # a concurrent run put the same tree there first: use it
                raise
        done = True
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        if not done:  # refused or failed: no empty <sha>/ or checkouts/ left behind
            _remove_empty(final.parent, cache)
    return final


def distinct(base: Side, head: Side) -> None:
    """`UsageError` when two sides are one source (a comparison of a thing with itself says nothing)."""
    if base.identity == head.identity:
        raise UsageError(
            f"{base.role} and {head.role} are the same source ({base.spec!r} and {head.spec!r} resolve to "
            f"{base.run_spec!r}); accepted: two different releases, checkouts or revisions"
        )


# --- the model families a run judges ---------------------------------------------------------------------------------
def selected_families(text: str | None, option: str = "--model") -> tuple[str, ...]:
    """``--model kimi-k3,internvl`` (or ``all``) as family names in the registry's order (default: Kimi-K3 alone,
    so a command without it runs as it always did); `UsageError` in one line naming the accepted ones, before
    anything loads."""
    if text is None:
        return (DEFAULT_FAMILY,)
    asked = [m.strip().lower() for m in str(text).split(",") if m.strip()]
    unknown = [m for m in asked if m not in FAMILIES and m != ALL_FAMILIES]
    if not asked or unknown:
        raise UsageError(
            f"{option}: unknown model family {(unknown or [str(text)])[0]!r}; accepted: {', '.join(FAMILIES)}, a "
            f"comma-separated list of them, or {ALL_FAMILIES}"
        )
    return tuple(FAMILIES) if ALL_FAMILIES in asked else tuple(f for f in FAMILIES if f in asked)


def require_extras(families: tuple[str, ...], option: str = "--model") -> tuple[str, ...]:
    """The front door's check that the extras the families' trained sides need are installed (Qwen's is
    transformers' own processor class, `Family.needs`): `UsageError` in one line naming the extra, before
    anything loads. The default (Kimi-K3) needs none. Returns ``families``."""
    from deferlab.reference.system.extras import why_missing

    for name in families:
        for extra in FAMILIES[name].needs:
            missing = why_missing(extra)
            if missing is not None:
                raise UsageError(f"{option} {name}: its trained side {missing}")
    return families


def family_option(families: Iterable[str]) -> str:
    """The ``System.family`` (and the checks' ``--model``) of ``families``: the one name, ``all``, or a list."""
    chosen = tuple(dict.fromkeys(families)) or (DEFAULT_FAMILY,)
    if set(chosen) == set(FAMILIES) and len(chosen) > 1:
        return ALL_FAMILIES
    return ",".join(chosen)


def answered_by(engine_name: str, families: Iterable[str], claim_id: str) -> bool:
    """Whether some column of ``families`` on ``engine_name`` has a verdict for ``claim_id``."""
    return any(System(engine_name, "installed").answers(claim_id, f) for f in families)


# --- the claims a run asks for, and its switch ------------------------------------------------------------------------------------
def selected_claims(text: str | None, engine_name: str | None = None, option: str = "--claims") -> tuple[str, ...]:
    """``--claims C4,c9`` as claim ids in claim order (() for every claim); `UsageError` naming an unknown id, or
    one ``engine_name`` has no verdict for."""
    if text is None:
        return ()
    from deferlab.reference.system.claims import load_claims

    known = list(load_claims())
    answered = [c for c in known if engine_name is None or engine(engine_name).answers(c)]
    asked = [c.strip().upper() for c in str(text).split(",") if c.strip()]
    unknown = [c for c in asked if c not in known]
    if not asked or unknown:
        raise UsageError(
            f"{option}: {', '.join(map(repr, unknown)) or repr(text)} is no claim; accepted: comma-separated ids "
            f"among {', '.join(answered)}"
        )
    foreign = [c for c in asked if c not in answered]
    if foreign:
        raise UsageError(
            f"{option}: {', '.join(map(repr, foreign))}: {engine(engine_name or 'sglang').display} has no verdict "
            f"for it; accepted: comma-separated ids among {', '.join(answered)}"
        )
    return tuple(sorted_claims(asked))


def strict_switch(args: Any) -> bool:
    """The strict switch of a command (semantics §17.1): its ``--strict``, or ``DEFERLAB_STRICT=1`` (what CI and
    deferlab's own test command set)."""
    from deferlab.reports.core.runner import STRICT_ENV

    return bool(getattr(args, "strict", False)) or os.environ.get(STRICT_ENV, "").strip() not in ("", "0")


# --- what a run gave, in a line --------------------------------------------------------------------------------------
def verdict_counts(verdicts: Mapping[str, str]) -> str:
    """``fails 2, holds 10`` (or ``no verdicts``): a progress line's summary of a run."""
    counts: dict[str, int] = {}
    for v in verdicts.values():
        counts[v] = counts.get(v, 0) + 1
    return ", ".join(f"{k} {n}" for k, n in sorted(counts.items())) or "no verdicts"


def run_error(
    error: str | None,
    failed: Mapping[str, str],
    rows: Iterable[Mapping[str, Any]],
    claims: Mapping[str, str] | None = None,
) -> str | None:
    """Why a run's verdicts are not the whole story, in one line (None: they are): the runner's own ``error``,
    else a claim test that failed or errored, unless its claim's only fault is a signature claims.toml does not
    document (the strict switch fails the test on it; the verdict, with that signature marked new, is kept).
    ``claims``: node id -> the claim its marker names (`RunRecord.test_claims`); a node without one: `_claim_of`."""
    if error:
        return error
    from deferlab.reports.core.claims import new_signatures

    renamed = {str(r.get("id", "")).upper() for r in rows if new_signatures(dict(r))}
    unexplained = {n: m for n, m in failed.items() if ((claims or {}).get(n) or _claim_of(n)) not in renamed}
    if not unexplained:
        return None
    node, message = next(iter(unexplained.items()))
    more = f" (and {len(unexplained) - 1} more)" if len(unexplained) > 1 else ""
    return f"a claim test failed or errored{more}: {node.rsplit('::', 1)[-1]}: {_last(message)[:240]}"


def _claim_of(node: str) -> str:
    """The claim a failed test checks: claims.toml's ``property``, else its name (`claims.claim_of_node`)."""
    return claim_of_node(node) or ""
