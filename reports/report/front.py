"""The front door of ``deferlab report`` and its companions (`reports.report.cli`): each check turns a bad argument
into a `UsageError` in one line (the option, the value, what is wrong, what is accepted) before any work starts.

Moved here from the CLI module so that it stays a map of the commands (and under the 400-line bound).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from deferlab.reference.system import claims as registry
from deferlab.reference.system.config import PreprocessConfig
from deferlab.reference.system.engines import engine as engine_facts
from deferlab.reference.system.errors import DeferlabInputError, UsageError
from deferlab.reference.system.snapshot import checkpoint_family
from deferlab.reference.system.validate import check_choice, check_int
from deferlab.reports.core import runner
from deferlab.reports.core.claims import PROFILES
from deferlab.reports.core.frontdoor import check_out_file, refuse_before_first, refuse_unserved
from deferlab.reports.report import claims


def usage(check: Any, *args: Any, **kwargs: Any) -> Any:
    """Run a `reference.system.validate` check, turning its error into a `UsageError` (exit status 2)."""
    try:
        return check(*args, **kwargs)
    except DeferlabInputError as e:
        raise UsageError(str(e)) from None


def check_profile(value: str) -> str:
    return usage(check_choice, "--profile", value, PROFILES)


def check_max_side(value: int, flag: str) -> int:
    return usage(check_int, flag, value, minimum=2, maximum=8192)


def load_or_refuse(system: Any) -> None:
    """Load ``system`` once, in a fresh process, before any step runs (`runner.check_loads`): a source that cannot
    be resolved or loaded (unknown version, not a checkout, no Kimi-K3 path, offline, an import failing inside the
    engine) is bad usage, refused in the loader's one line (what was tried, what is accepted), nothing written.
    A release before the engine's first with the Kimi-K3 path is refused without fetching it."""
    refuse_before_first(f"--{system.engine}", system.engine, str(system.spec))
    try:
        runner.check_loads(system)
    except runner.LoadError as e:
        raise UsageError(f"--{system.engine}: {e}") from None


def checkpoint_family_of(args: argparse.Namespace) -> str:
    try:  # the family its processor class names, checked against --model
        return checkpoint_family(args.checkpoint, getattr(args, "model", None))
    except DeferlabInputError as e:
        raise UsageError(f"--checkpoint: {e}") from None


def read_checkpoint(directory: str) -> tuple[PreprocessConfig, dict[str, Any]]:
    """--checkpoint DIR read (`reference.system.snapshot`), its refusal as bad usage."""
    from deferlab.reference.system.snapshot import read_checkpoint as read

    try:
        return read(directory)
    except DeferlabInputError as e:
        raise UsageError(f"--checkpoint: {e}") from None


def load_kimi_or_refuse(engine: str, spec: str) -> None:
    """Load ``engine`` ``spec`` once, in a short child (`reports.report.served.kimi` ``check``: this process loads
    no engine), before any step runs, through its plugin's hooks (``kimi_load``: this module names no engine's
    package): an unknown version, a release without the Kimi-K3 path (refused without fetching it), a folder that
    is not a checkout of it, or offline is bad usage, refused in the driver's one line with nothing written."""
    facts = engine_facts(engine)
    refuse_before_first(facts.option, facts.name, spec)
    why = _kimi_load_in_child(facts.name, spec)
    if why is not None:
        raise UsageError(f"{facts.option}: {why}")


def _kimi_load_in_child(engine: str, spec: str) -> str | None:
    """None when the child loaded ``spec``; else the hooks' one line (or, from a child that failed otherwise, the
    last line it wrote)."""
    from deferlab.reports.core import process
    from deferlab.reports.report.served.kimi import FAILED, MODULE

    rc, _, err = process.capture([sys.executable, "-m", MODULE, "check", engine, spec])
    if rc == 0:
        return None
    lines = [x for x in err.splitlines() if x.strip()]
    said = [x[len(FAILED) :] for x in lines if x.startswith(FAILED)]
    return said[-1] if said else f"its load check exited {rc}" + (f": {lines[-1][:200]}" if lines else "")


def load_vllm_or_refuse(spec: str) -> None:
    """`load_kimi_or_refuse` for vLLM, the one engine whose Kimi-K3 load the CLI checks itself (`reports.report.cli`)."""
    load_kimi_or_refuse("vllm", spec)


def refuse_all_na(args: argparse.Namespace, named: str | None) -> None:
    """No engine release of this report serves any family asked (--model, else the family of --checkpoint, ``named``,
    else Kimi-K3), so every claim would be n/a: refused with the n/a line `deferlab versions` gives, before the
    report runs (a release before the engine's Kimi-K3 path: that line instead)."""
    from deferlab.reference.system.engines import ENGINES
    from deferlab.reports.core.sides import selected_families

    sides = [(name, str(spec)) for name in ENGINES if (spec := getattr(args, name, None)) is not None]
    families = selected_families(args.model or named)
    what = f"--model {args.model}" if args.model else f"--checkpoint {args.checkpoint}" if named else "--model"
    if sides:
        refuse_unserved(f"{what} ({', '.join(families)})" if not args.model else what, sides, families)


def results(directory: Path) -> list[Any]:
    """``--from-results DIR`` read as the runner's records; bad usage (one line) when it holds no results file."""
    if not (Path(directory) / registry.RESULTS_FILE).is_file():
        raise UsageError(f"--from-results: {str(Path(directory) / registry.RESULTS_FILE)!r} does not exist; "
                         f"accepted: a folder holding the {registry.RESULTS_FILE} of a claim run")  # fmt: skip
    try:
        return claims.read_claims(directory)
    except ValueError as e:
        raise UsageError(f"--from-results: {e}") from None


_RESOLVE_IMPL = """import sys
from deferlab.properties.seam import resolve_impl
try:
    resolve_impl(sys.argv[1])
except (ValueError, TypeError) as e:
    print(str(e).splitlines()[0], file=sys.stderr)
    sys.exit(2)
"""


def check_impl(spec: str) -> None:
    """``--impl NAME|module:object`` resolved once in a child (the seam lives in the test package, which the CLI
    does not import), before the claims run: a name or object that is not a seam implementation is bad usage,
    not a failure in every claim test of the report."""
    from deferlab.reports.core import process

    rc, _, err = process.capture([sys.executable, "-c", _RESOLVE_IMPL, spec], timeout=300)
    if rc == 2:
        line = (err.strip().splitlines() or [f"--impl {spec!r}: not a seam implementation"])[-1]
        raise UsageError(f"{line}; accepted: a registered name or module:object naming a seam implementation")


def check_calibrate(args: argparse.Namespace) -> None:
    """``deferlab calibrate``'s arguments, before any measurement: --repeats 1..100, --port a TCP port, --out a
    .toml file in a folder this user can write (the simulator reads a profile path only if it ends in .toml)."""
    if not 1 <= args.repeats <= 100:
        raise UsageError(f"--repeats {args.repeats}: out of range; accepted: an int in 1..100")
    if args.port is not None and not 1 <= args.port <= 65535:
        raise UsageError(f"--port {args.port}: not a TCP port; accepted: an int in 1..65535, or none (a free one)")
    check_out_file(args.out, "--out", ".toml")
