"""deferlab's one family of input errors: every front door raises one of these.

Why one family: a caller (the CLI, a test, a user's script) can catch
`DeferlabInputError` for "you gave deferlab something it does not accept",
whatever entry point it came through, while the subclasses of `ValueError`
and `TypeError` keep every existing ``except ValueError`` / ``except
TypeError`` working. Every message has the same shape: which input, what is
wrong with it, what is accepted (see `reference.system.validate`).

Errors raised *by a system under test* (SGLang's own, or ``impl``'s model of
it) are not in this family: they are evidence, recorded by the claims.
"""

from __future__ import annotations


class DeferlabInputError(Exception):
    """Base of every bad-input error deferlab raises at a front door."""


class InputValueError(DeferlabInputError, ValueError):
    """A value of the right type that deferlab does not accept (out of range, unknown name, bad shape)."""


class InputTypeError(DeferlabInputError, TypeError):
    """A value of a type deferlab does not accept."""


class ConfigError(InputValueError):
    """A preprocessing config (a file, a ``media_proc_cfg`` dict, a profile name) that cannot be used."""


class ScenarioError(InputValueError):
    """A simulator scenario, topology or workload table that cannot be run."""


class ProfileError(InputValueError):
    """A simulator cost profile with a missing constant, an unknown unit or an unknown key."""


class UsageError(InputValueError):
    """A command-line argument of ``deferlab`` that cannot be used (exit status 2)."""


class SourceError(InputValueError):
    """An SGLang source (``installed``, a checkout path, a version) that cannot be loaded."""


class CorpusError(InputValueError):
    """A corpus folder, its manifest or one of its files is not what the manifest says."""


class Stopped(BaseException):  # noqa: N818 - what happened, not an error of ours
    """The command was told to stop (SIGTERM; Ctrl-C is `KeyboardInterrupt`).

    A `BaseException`, as `KeyboardInterrupt` is: a stop must pass every ``except Exception`` on its way out
    (a step runner recording failed steps, a harness recording a child's failure, a property engine looking
    for flaky tests), so it is never mistaken for a failed step or a verdict. Here, not in the CLI's process
    module, so the loader (which records what a module body raised) can let it through too."""
