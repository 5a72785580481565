"""Front-door checks more than one command makes: each a `UsageError` in one line (the option, the value, what is
wrong, what is accepted), raised before any work, fetch or write.

* `check_offline_switch`: ``DEFERLAB_OFFLINE`` read once, at every command's door (`reports.cli.main`), so a typo
  (``maybe``) is refused even by a command that would never fetch, or only fetch in a child process later.
* `refuse_before_first`: a release older than its engine's first checked one (`EngineFacts.first_release`,
  the reason its `floor`), refused without asking the package index.
* `refuse_unserved`: a run none of whose columns serves any family asked, in the ``n/a`` line `deferlab versions`
  gives (`reports.versions.columns.not_served`, the one decision).
* `check_out_file`: an output file's path (``deferlab calibrate --out``); `check_junit` the ``--junit FILE`` of
  report, versions and compare.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from deferlab.reference.system.errors import DeferlabInputError, UsageError
from deferlab.reference.system.systems import at_least, engine, is_release


def check_offline_switch() -> None:
    """``DEFERLAB_OFFLINE`` is yes, no or unset (`impl.loader.wheels.offline`'s one reading), else bad usage."""
    from deferlab.impl.loader.wheels import offline

    try:
        offline()
    except DeferlabInputError as e:
        raise UsageError(str(e)) from None


def refuse_before_first(what: str, engine_name: str, spec: str) -> None:
    """``spec`` a release before ``engine_name``'s first checked one: refused with the plugin's reason
    (`EngineFacts.floor`: SGLang's and vLLM's Kimi-K3 image path), naming that first one."""
    facts = engine(engine_name)
    if is_release(spec) and not at_least(spec, facts.first_release):
        raise UsageError(
            f"{what}: {engine_name} source {spec!r}: {facts.floor}; accepted: {facts.first_release} and "
            f"later ('installed', a checkout path, or a release such as {facts.example_release})"
        )


def refuse_unserved(option: str, sides: Iterable[tuple[str, str]], families: Iterable[str]) -> None:
    """When no (engine, release) of ``sides`` serves any of ``families``: every claim would be ``n/a``, so the run
    is refused with the ``n/a`` line versions gives. A side that is not a release (``installed``, a checkout) is
    taken to serve: its version is known only once loaded."""
    from deferlab.reports.versions.columns import not_served

    families, sides = tuple(families), list(sides)
    for engine_name, spec in sides:  # a release before the engine's Kimi-K3 path: that, not n/a per family
        refuse_before_first(f"--{engine_name}", engine_name, spec)
    reasons = []
    for engine_name, spec in sides:
        if not is_release(spec):
            return
        why = [r for f in families if (r := not_served(engine_name, spec, f)) is not None]
        if len(why) < len(families):
            return
        reasons += why
    if reasons:
        from deferlab.reference.system.families import FAMILIES

        served = [f for f in FAMILIES if any(not_served(e, spec, f) is None for e, spec in sides)]
        where = " or ".join(f"{engine(e).display} {spec}" for e, spec in sides)
        raise UsageError(
            f"{option}: {'; '.join(dict.fromkeys(reasons))}; accepted: a family {where} serves "
            f"({', '.join(served) or 'none'}; `deferlab families` lists them per release)"
        )


def check_out_file(path: str | Path, flag: str, suffix: str | None = None) -> Path:
    """``path`` as a file to be written (ending in ``suffix`` when given): not a folder, in a folder that exists or
    can be made and that this user can write (`reports.core.atomic.check_out_dir`, nothing left behind)."""
    from deferlab.reports.core.atomic import check_out_dir

    target = Path(path).expanduser()
    accepted = f"accepted: a {f'{suffix} file' if suffix else 'file'} path in a folder this user can write"
    if target.is_dir():
        raise UsageError(f"{flag} {str(path)!r}: is a directory; {accepted}")
    if suffix is not None and target.suffix != suffix:
        raise UsageError(f"{flag} {str(path)!r}: not a {suffix} file; {accepted}")
    if target.exists() and not target.is_file():
        raise UsageError(f"{flag} {str(path)!r}: exists and is not a file; {accepted}")
    try:
        check_out_dir(target.parent, flag)
    except UsageError:
        raise UsageError(f"{flag} {str(path)!r}: its folder cannot be made or written; {accepted}") from None
    return target


def check_junit(path: Path | None) -> None:
    """``--junit FILE`` (None: not given) as report, versions and compare take it: not a folder (their one line
    for that), else `check_out_file`'s checks; the XML itself is written after the run."""
    if path is None:
        return
    if Path(path).is_dir():
        raise UsageError(f"--junit: {str(path)!r} is a directory; accepted: a file path for the XML")
    check_out_file(path, "--junit")
