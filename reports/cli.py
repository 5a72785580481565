"""The ``deferlab`` command line: one parser over one package per command, and the exit statuses.

Where each command starts (its parser and its ``run``): ``report`` and its companions (``sweep``, ``sim``,
``bench``, ``test``, ``claims``, ``calibrate``, ``baseline``) in `reports.report.cli`; ``versions`` in
`reports.versions.cli`; ``compare`` in `reports.compare.cli`; ``repro`` in `reports.repro.cli`; ``mutate``
in `reports.mutate.cli`; ``cache`` in `reports.core.cache`. What every command shares (the runner, its
child processes, the one comparison and baseline type, atomic writes) is `reports.core`.

Exit codes: 0 success / no regression, 1 a regression (or a part that failed when run alone), 2 bad usage
(every argument is checked before any work starts, and a bad one gets one line naming the option, the
value and what is accepted), 3 the output was written but a step failed; 130 stopped by Ctrl-C, 143 by
SIGTERM. However a command ends, no child process of it is left running (`reports.core.process.stopped`).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Any

from deferlab.reference.system.errors import UsageError
from deferlab.reports.core import frontdoor, process

# command -> the module with its ``add_parser(sub)`` (or ``add_parsers``) and ``run(args)`` (or ``COMMANDS``).
PACKAGES = (
    "deferlab.reports.report.cli",
    "deferlab.reports.versions.cli",
    "deferlab.reports.compare.cli",
    "deferlab.reports.repro.cli",
    "deferlab.reports.mutate.cli",
    "deferlab.reports.families.cli",
    "deferlab.reports.findings.cli",
    "deferlab.reports.core.cache",
)
PASS_THROUGH = {"sim", "test"}  # everything after these belongs to another parser (the simulator's, pytest's)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse exits 2 itself; keep its wording, prefix ours
        self.print_usage(sys.stderr)
        raise UsageError(message)


def _modules() -> list[Any]:
    return [importlib.import_module(name) for name in PACKAGES]


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, Any]]:
    """The whole parser, and command -> the function that runs it."""
    parser = _Parser(prog="deferlab", description="Verification of multimodal image preprocessing in serving engines")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    handlers: dict[str, Any] = {}
    for module in _modules():
        if hasattr(module, "add_parsers"):
            module.add_parsers(sub)
            handlers.update(module.COMMANDS)
        else:
            p = module.add_parser(sub)
            handlers[p.prog.split()[-1]] = module.run
    return parser, handlers


def _check_plugins() -> None:
    """The engine plugins (`reference.system.engines`): each one that failed to load is one line on stderr (the
    others still work); two claiming one name or option refuse the command (exit 2), naming both."""
    from deferlab.reference.system import engines
    from deferlab.reference.system.errors import DeferlabInputError

    for line in engines.BROKEN:
        print(f"deferlab: warning: {line}; the other engines still work", file=sys.stderr)
    try:
        engines.check_registry()
    except DeferlabInputError as e:
        raise UsageError(str(e)) from None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``deferlab`` console script; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        with process.stopped():
            frontdoor.check_offline_switch()  # every command's, even one that fetches nothing (or only in a child)
            _check_plugins()
            if argv[:1] and argv[0] in PASS_THROUGH:
                from deferlab.reports.report import cli as report_cli

                return report_cli.pass_through(argv[0], argv[1:])
            parser, handlers = build_parser()
            args = parser.parse_args(argv)
            return int(handlers[args.command](args))
    except UsageError as e:
        print(f"deferlab: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("deferlab: stopped (Ctrl-C); no child process is left running", file=sys.stderr)
        return 130
    except process.Stopped:
        print("deferlab: stopped (SIGTERM); no child process is left running", file=sys.stderr)
        return 143


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
