"""What an executor runs and returns: a `Task` (one runner call and what it needs) and its `Outcome`.

Apart from `reports.core.executor` so the Ray executor (`reports.core.cluster`), which the local one imports
only when ``--cluster`` is given, imports these and not the module that chooses it (no import cycle).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from deferlab.reports.core import runner as runner_mod

CLUSTER_FORMS = "accepted: 'auto' (the cluster this machine belongs to), 'ray://HOST:PORT', or 'local'"


@dataclass(frozen=True)
class Task:
    """One runner call: ``key`` names it in the command's output; ``cpus`` and ``gpus`` are what it needs (Ray
    schedules by them; the local pool runs ``jobs`` CPU tasks at once); ``retries``: attempts after the first when
    it times out or its worker is lost; ``resources``: further Ray resources (tests stand in for a GPU with one)."""

    key: str
    request: runner_mod.Request
    cpus: int = 1
    gpus: int = 0
    retries: int = 1
    resources: dict[str, float] = field(default_factory=dict)
    work: Path | None = None  # the local pool's scratch folder for it (a cluster worker makes its own)
    load: bool = False  # load the system first where the task runs (`perform`): a release that cannot load is
    # its loader's one line, not a run of checks that all error
    launcher: runner_mod.Launcher | None = None  # how the runner's child starts where the task runs (None: the
    # executor's); picklable, as Ray ships the task (a fake engine's, in tests)

    def perform(self, work: Path | None, launcher: runner_mod.Launcher) -> runner_mod.RunRecord:
        """The task where it runs (`perform`): its system loaded first when ``load`` (`runner.check_loads`; a spec
        that cannot load is a record with the loader's line), then the one runner. A subclass that needs more
        than one call where it runs (a mutant's tree, `reports.mutate.remote`) gives its own."""
        request = self.request
        if self.load:
            try:
                runner_mod.check_loads(request.system)
            except runner_mod.LoadError as e:
                return runner_mod.RunRecord(request.system, request.profile, error=str(e))
        return runner_mod.run(request, work=work, launcher=launcher)


@dataclass
class Outcome:
    """What became of a task: its record (None when every attempt failed), the error of the last failed attempt,
    the attempts it took, and where it ran (``node``; ``cuda``: read from ``torch.cuda`` inside the task)."""

    task: Task
    record: runner_mod.RunRecord | None
    error: str | None = None
    attempts: int = 1
    node: str = "local"
    cuda: bool | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.record is not None and self.error is None


def perform(
    task: Task, *, work: Path | None = None, launcher: runner_mod.Launcher = runner_mod.cold
) -> runner_mod.RunRecord:
    """The task where it runs (this machine's pool, a cluster worker): `Task.perform`, started by the task's own
    launcher when it carries one, else ``launcher``."""
    return task.perform(work if work is not None else task.work, task.launcher or launcher)
