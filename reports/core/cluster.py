"""The Ray executor (``--cluster auto | ray://HOST:PORT | local``): each task one runner call on a worker.

How deferlab reaches the workers: it is installed there (the same version as the driver's: ``pip install
deferlab[cluster]`` on every node, the cluster's image for KubeRay); every task first checks that its worker's
deferlab, torch and Python are the driver's, and a worker that differs refuses the task in one line. Engine
wheels are fetched into the worker's own cache (the runner's child loads them there), never assumed shared.

Ray's defaults are set, not taken: a task is retried once (``max_retries``) when its worker is lost; a task past
its timeout is cancelled and submitted once more, then recorded as timed out (Ray has no task timeout). Ctrl-C or
SIGTERM on the driver cancels every task still running; ``local`` starts a Ray instance on this machine (loopback
only, dashboard and usage stats off) and stops it on the way out, killing every process a task started.
"""

from __future__ import annotations

import contextlib
import os
import platform
import signal
import socket
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from deferlab.reference.system.errors import UsageError
from deferlab.reports.core.tasks import CLUSTER_FORMS, Outcome, Task, perform

OWNER_ENV = "DEFERLAB_CLUSTER_OWNER"  # set in every task's environment: a local run's leftovers are found by it
GPU_RESOURCE_ENV = "DEFERLAB_GPU_RESOURCE"  # a Ray resource standing in for a GPU (tests: a node given one)
POLL_S = 0.5
CANCEL_GRACE_S = 5.0  # a cancelled task's time to return before a remote one is cancelled by force
QUIET = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_DISABLE_USAGE_STATS": "1"}


def versions() -> dict[str, str]:
    """What a worker must share with the driver: deferlab's, torch's and Python's versions."""
    import importlib.metadata

    import torch

    return {
        "deferlab": importlib.metadata.version("deferlab"),
        "torch": str(torch.__version__),
        "python": platform.python_version(),
    }


def execute(task: Task, driver: dict[str, str]) -> dict[str, Any]:
    """The body of a Ray task: check the worker, run the runner, say where it ran (``cuda`` read from
    ``torch.cuda`` here, not assumed)."""
    import torch

    node = socket.gethostname()
    mine = versions()
    if mine != driver:
        differ = ", ".join(f"{k} {mine[k]} (driver {driver[k]})" for k in driver if mine.get(k) != driver[k])
        return {"refused": f"worker {node}: {differ}; accepted: a worker with the driver's deferlab, torch and Python"}
    record = perform(task)
    return {"record": record, "node": node, "cuda": bool(torch.cuda.is_available())}


@contextlib.contextmanager
def loopback_node() -> Iterator[None]:
    """Keeps the node address ``127.0.0.1`` while ``local`` starts Ray: Ray 2.60's ``ray.init`` replaces it with
    this machine's routable address (``services.resolve_ip_for_localhost``) unless its multi-node clusters are off
    (``ray_constants.ENABLE_RAY_CLUSTER``, what ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` sets at import), and its
    GCS, raylet, workers and agents listen on every interface unless the node address is 127.0.0.1. Off for
    this start only: a later ``auto`` in this process must find its node's routable address."""
    from ray._private import ray_constants

    before = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = before


def auth_hint(address: str) -> str:
    """What a failed ``ray://`` connection adds when this driver sends no token: a cluster ``ray start`` began
    (Ray 2.60) has token authentication on, and its client server drops a call without one (the driver times out)."""
    if not address.startswith("ray://") or os.environ.get("RAY_AUTH_MODE", "").lower() == "token":
        return ""
    token = "RAY_AUTH_TOKEN or ~/.ray/auth_token"
    return f"; a cluster with token authentication needs RAY_AUTH_MODE=token and its token here ({token})"


TRANSIENT = "Initialization failure from server"  # Ray Client's server could not start this client's session yet


def _client_init(ray: Any, address: str, t0: float, timeout: float) -> None:
    """``ray.init`` on a Ray Client address, tried again while the server answers `TRANSIENT` and the connect
    timeout lasts: the head's client server starts a session process per client, which a loaded machine may not
    start in Ray's own time (seen on CI's 2 cores); any other failure is the caller's one line at once."""
    while True:
        try:
            ray.init(address=address, log_to_driver=False, configure_logging=False)
            return
        except Exception as e:  # noqa: BLE001 - re-raised unless it is the transient one
            if TRANSIENT not in str(e) or time.perf_counter() - t0 > timeout:
                raise
            with contextlib.suppress(Exception):
                ray.shutdown()
            time.sleep(2.0)


def reachable(address: str, timeout: float) -> str | None:
    """None when ``ray://HOST:PORT`` answers a TCP connection within ``timeout``; else the one-line reason."""
    host, _, port = address[len("ray://") :].rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return None
    except OSError as e:
        return f"nobody answers at {host}:{port} ({e.strerror or type(e).__name__})"


class RayExecutor:
    """Tasks through Ray: submitted with their CPUs, GPUs and resources, each awaited to its timeout."""

    name = "ray"

    def __init__(
        self,
        address: str,
        *,
        say: Callable[[str], None] = print,
        connect_timeout: float = 30.0,
        num_cpus: int | None = None,
        resources: dict[str, float] | None = None,
    ) -> None:
        os.environ.update(QUIET)
        import ray

        self._ray = ray
        self.address = address
        self.say = say
        self.owner = uuid.uuid4().hex
        self._local = address == "local"
        self._running: dict[Any, tuple[Task, float, int]] = {}
        if address.startswith("ray://"):
            why = reachable(address, min(connect_timeout, 10.0))
            if why is not None:
                raise UsageError(f"--cluster: {address}: {why}; {CLUSTER_FORMS}")
        t0 = time.perf_counter()
        try:
            if self._local:
                with loopback_node():
                    ray.init(
                        num_cpus=num_cpus or os.cpu_count() or 1, resources=resources or {}, include_dashboard=False,
                        dashboard_host="127.0.0.1", _node_ip_address="127.0.0.1", log_to_driver=False,
                        configure_logging=False,
                    )  # fmt: skip
                elsewhere = sorted({n["NodeManagerAddress"] for n in ray.nodes()} - {"127.0.0.1"})
                if elsewhere:  # a Ray whose start no longer keeps it on loopback: refused, not run open
                    raise RuntimeError(f"Ray started on {', '.join(elsewhere)}, not on loopback only")
            else:
                _client_init(ray, address, t0, connect_timeout)
        except Exception as e:  # noqa: BLE001 - any failure to connect is one line at the front door
            with contextlib.suppress(Exception):
                ray.shutdown()
            first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
            raise UsageError(
                f"--cluster: {address}: cannot connect ({first}){auth_hint(address)}; {CLUSTER_FORMS}"
            ) from None
        self.started_s = round(time.perf_counter() - t0, 1)
        self.driver = versions()
        self._remote = ray.remote(execute)
        say(f"cluster {address}: {self.describe()} (joined in {self.started_s} s)")

    def describe(self) -> str:
        res = self._ray.cluster_resources()
        nodes = len([n for n in self._ray.nodes() if n.get("Alive")])
        gpus = f", {int(res['GPU'])} GPU" if res.get("GPU") else ""
        return f"{nodes} node(s), {int(res.get('CPU', 0))} CPU{gpus}"

    def gpu_demand(self) -> dict[str, Any] | None:
        """What a task that needs CUDA asks for here: one ``GPU``, or one of the resource `GPU_RESOURCE_ENV` names
        (a stand-in the tests give a node); None when no node of the cluster offers it."""
        res, stand_in = self._ray.cluster_resources(), os.environ.get(GPU_RESOURCE_ENV)
        if stand_in:
            return {"resources": {stand_in: 1.0}} if res.get(stand_in, 0) >= 1 else None
        return {"gpus": 1} if res.get("GPU", 0) >= 1 else None

    def _submit(self, task: Task, attempt: int) -> Any:
        opts = {
            "num_cpus": task.cpus, "num_gpus": task.gpus, "max_retries": task.retries, "retry_exceptions": False,
            "resources": dict(task.resources), "runtime_env": {"env_vars": {OWNER_ENV: self.owner}},
        }  # fmt: skip
        ref = self._remote.options(**opts).remote(task, self.driver)
        self._running[ref] = (task, time.monotonic(), attempt)
        return ref

    def _deadline(self, task: Task) -> float | None:
        timeout = task.request.timeout
        return None if timeout is None else timeout + 60.0  # the runner kills its child at timeout: room to return

    def map(self, tasks: Sequence[Task], done: Callable[[Outcome], None]) -> None:
        ray = self._ray
        for task in tasks:
            self._submit(task, 1)
        try:
            while self._running:
                ready, _ = ray.wait(list(self._running), num_returns=1, timeout=POLL_S)
                for ref in ready:
                    task, started, attempt = self._running.pop(ref)
                    done(self._outcome(ref, task, started, attempt))
                self._expire(done)
        except BaseException:
            self.cancel_all()
            raise

    def _outcome(self, ref: Any, task: Task, started: float, attempt: int) -> Outcome:
        seconds = round(time.monotonic() - started, 2)
        try:
            got = self._ray.get(ref)
        except Exception as e:  # noqa: BLE001 - a lost worker (after Ray's retry) is this task's outcome
            first = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
            return Outcome(task, None, f"{type(e).__name__}: {first}", attempt + task.retries, "?", None, seconds)
        if "refused" in got:
            return Outcome(task, None, got["refused"], attempt, "?", None, seconds)
        return Outcome(task, got["record"], None, attempt, got["node"], got["cuda"], seconds)

    def _expire(self, done: Callable[[Outcome], None]) -> None:
        now = time.monotonic()
        for ref, (task, started, attempt) in list(self._running.items()):
            deadline = self._deadline(task)
            if deadline is None or now - started < deadline:
                continue
            self._cancel(ref)
            self._running.pop(ref, None)
            if attempt <= task.retries:
                self.say(f"{task.key}: no result within {deadline:.0f} s; submitted once more")
                self._submit(task, attempt + 1)
            else:
                done(Outcome(task, None, f"no result within {deadline:.0f} s, {attempt} attempts", attempt, "?", None))

    def _cancel(self, ref: Any) -> None:
        with contextlib.suppress(Exception):
            self._ray.cancel(ref, force=False)  # a KeyboardInterrupt in the task: its runner reaps its child

    def cancel_all(self) -> None:
        """Cancel every task still running (Ctrl-C, SIGTERM, a failed command): each is asked to stop, then
        given `CANCEL_GRACE_S` to return. Only on a remote cluster is a task still running after that cancelled
        by force, and only that task: a forced cancel racing the reply of a task that is returning aborts Ray
        2.60's driver ("Tried to complete task that was not pending", task_manager.cc), which took a CI run's
        test process down. ``local`` needs no force: `close` stops the instance and kills what its tasks
        started."""
        pending = list(self._running)
        for ref in pending:
            self._cancel(ref)
        if pending:
            with contextlib.suppress(Exception):
                _, pending = self._ray.wait(pending, num_returns=len(pending), timeout=CANCEL_GRACE_S)
        if not self._local:
            for ref in pending:
                with contextlib.suppress(Exception):
                    self._ray.cancel(ref, force=True)
        self._running.clear()

    def close(self) -> None:
        """Disconnect; ``local``: stop the instance and kill every process a task of this run started."""
        self.cancel_all()
        with contextlib.suppress(Exception):
            self._ray.shutdown()
        if self._local:
            kill_owned(self.owner)


def kill_owned(owner: str) -> list[int]:
    """SIGKILL every process of this user whose environment carries ``OWNER_ENV=owner`` (a task's children that
    outlived their worker); the pids killed."""
    mark = f"{OWNER_ENV}={owner}".encode()
    killed = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if mark in (entry / "environ").read_bytes().split(b"\0"):
                os.kill(int(entry.name), signal.SIGKILL)
                killed.append(int(entry.name))
        except (OSError, ProcessLookupError):
            continue
    return killed
