"""``--cluster`` on a Ray instance started on this machine's loopback: a mutation campaign whose mutants run as
Ray tasks equals the local pool's, stops on Ctrl-C and resumes its pending mutants; a worker killed mid-run is
retried once and its task's outcome recorded; a matrix of two fake systems gives the same records either way;
no Ray process is left after any of them; and the front door refuses a bad or silent address in one line.

The engines are the fakes of the mutate tests (``mutate_fake/``), their launchers shipped with the tasks (Ray
pickles them). One Ray instance per test at most (each start is 5-10 s).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("cosmic_ray", reason="deferlab mutate's operators are the deferlab[mutate] extra (cosmic-ray)")

from deferlab.reference.system.systems import System
from deferlab.reports import cli
from deferlab.reports.core import executor, runner
from deferlab.reports.mutate import cli as mutate
from deferlab.reports.mutate import remote
from deferlab.reports.mutate import render as mutate_render
from deferlab.reports.mutate.store import Store
from tests.reports.mutate_fake.fakes import FAKE, HERE, FakeHarness
from tests.reports.ray_support import mark, ray_processes
from tests.reports.ray_support import matrix as _matrix
from tests.reports.ray_support import seen as _seen

pytestmark = pytest.mark.extra("mutate")  # selected by CI's `-m extra` phase, skipped (naming it) without

GATE = "sglang/srt/gate.py"
CAMPAIGN = [
    "--sample",
    "20",
    "--seed",
    "2",
    "--timeout",
    "4",
    "--compare-selection",
    "2",
    "--first-kill",
    "--jobs",
    "2",
]
CAMPAIGN += [a for f in ("patches", "should_defer", "scale", "_self_check") for a in ("--target", f"{GATE}:{f}")]


class ClusterFake(FakeHarness):
    """The fake SGLang's harness with its node ids anchored at the fake's folder, as a real campaign's are at
    the checks' folder: shipped to a worker, they are re-anchored there (`remote.anchored`)."""

    def suite_root(self) -> Path:
        return HERE


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEFERLAB_CACHE", str(tmp_path / "cache"))  # one reference for both runs of a test
    monkeypatch.setattr(mutate_render, "EQUIVALENT", tmp_path / "none.toml")


class _Log:
    """The campaign's log, kept; raises KeyboardInterrupt (as Ctrl-C does) once ``stop_at`` mutants finished."""

    def __init__(self, stop_at: int | None = None) -> None:
        self.lines: list[str] = []
        self.stop_at = stop_at

    def write(self, text: str) -> None:
        self.lines.append(text)
        if self.stop_at is not None and text.startswith(f"[deferlab] mutate: {self.stop_at}/"):
            raise KeyboardInterrupt

    def flush(self) -> None:
        pass


def _mutate(out: Path, *argv: str, log: _Log) -> tuple[int, dict]:
    parser = argparse.ArgumentParser()
    mutate.add_parser(parser.add_subparsers())
    args = parser.parse_args(["mutate", "--sglang", str(FAKE), "--out", str(out), *CAMPAIGN, *argv])
    rc = mutate.run(args, log=log, harness=ClusterFake())
    doc = json.loads((out / "mutate.json").read_text()) if (out / "mutate.json").is_file() else {}
    return rc, doc


def _outcomes(doc: dict) -> dict[str, tuple]:
    both = lambda m: (m.get("all_claims") or {}).get("outcome")  # noqa: E731
    return {m["id"]: (m["outcome"], m["killed_by"], m.get("claims_run"), both(m)) for m in doc["mutants"]}


@pytest.mark.extra("cluster")
@pytest.mark.slow
def test_a_campaign_on_the_cluster_equals_the_local_pool_and_resumes_after_ctrl_c(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """20 mutants (kills by verdict and at load, survivors, two measured with every claim, --first-kill) on the
    local pool, then through ``--cluster local``: stopped by Ctrl-C after five, no Ray process left, resumed
    on the cluster with the fifteen pending only; every mutant's outcome is the pool's."""
    rc, pool = _mutate(tmp_path / "pool", log=_Log())
    assert rc == 0 and len(pool["mutants"]) == 20
    got = {o for o, *_ in _outcomes(pool).values()}
    assert {"killed", "killed at load", "survived"} <= got
    assert sum(1 for m in pool["mutants"] if "all_claims" in m) == 2

    marked = mark(monkeypatch)
    out = tmp_path / "cluster"
    stopped = _Log(stop_at=5)
    assert _mutate(out, "--cluster", "local", log=stopped)[0] == 130
    assert any("cluster local: 1 node(s), 2 CPU" in x for x in stopped.lines)
    assert ray_processes(marked, wait=15) == []  # cancelled, the instance stopped
    store = Store(out)
    kept = {r["id"]: r for r in store.records()}
    assert len(kept) == 5 and len(store.pending()) == 15 and not (out / "mutate.json").exists()
    store.close()

    log = _Log()
    rc, doc = _mutate(out, "--cluster", "local", "--resume", log=log)
    assert rc == 0, "".join(log.lines)
    assert any("20 mutants, 5 already done, 15 to run on the cluster local" in x for x in log.lines)
    assert sum(1 for x in log.lines if "/15 " in x) == 15  # each pending mutant once, none of the five again
    assert _outcomes(doc) == _outcomes(pool)
    final = {m["id"]: m for m in doc["mutants"]}  # the five kept as they were committed, not run again
    assert all((final[i]["outcome"], final[i]["seconds"]) == (r["outcome"], r["seconds"]) for i, r in kept.items())
    assert doc["control"]["outcome"] == pool["control"]["outcome"] == "survived" and doc["control"]["run"] == "cold"
    assert ray_processes(marked, wait=15) == []


@pytest.mark.extra("cluster")
@pytest.mark.slow
def test_a_cuda_only_mutant_asks_for_the_clusters_gpu_and_records_where_it_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mutants the equivalents file lists as CUDA-only ask for a GPU where a node offers one (here a custom
    resource stands in for it): the task is placed there (it could run nowhere else), and its record says what it
    asked for and that torch.cuda was absent where it ran, so the survivor still reads "needs CUDA". Without the
    resource on the cluster they run on CPU as before, with one line saying so."""
    marked = mark(monkeypatch)
    monkeypatch.setenv("DEFERLAB_GPU_RESOURCE", "GPU_STANDIN")
    first = _Log()
    rc, plain = _mutate(tmp_path / "plain", "--cluster", "local", "--sample", "4", "--seed", "0", log=first)
    assert rc == 0 and len(plain["mutants"]) == 4, "".join(first.lines)
    ids = [m["id"] for m in plain["mutants"]]
    survivor = next(m["id"] for m in plain["mutants"] if m["outcome"] == "survived")
    listed = tmp_path / "cuda.toml"
    listed.write_text("".join(f'[[cuda_only]]\nid = "{i}"\nreason = "stand-in"\n\n' for i in ids))
    monkeypatch.setattr(mutate_render, "EQUIVALENT", listed)
    rc, _ = _mutate(tmp_path / "no-gpu", "--cluster", "local", "--sample", "4", "--seed", "0", log=(none := _Log()))
    assert rc == 0 and any("4 CUDA-only mutant(s) (reviewed): no GPU on the cluster" in x for x in none.lines)

    with_gpu = lambda cluster, **kw: executor.executor_for(cluster, resources={"GPU_STANDIN": 1.0}, **kw)  # noqa: E731
    monkeypatch.setattr(mutate, "executor_for", with_gpu)
    log = _Log()
    rc, doc = _mutate(tmp_path / "gpu", "--cluster", "local", "--sample", "4", "--seed", "0", log=log)
    assert rc == 0, "".join(log.lines)
    assert any("4 CUDA-only mutant(s) (reviewed): 4 to a GPU node" in x for x in log.lines), log.lines
    for m in doc["mutants"]:
        assert m["gpu_task"]["asked"] == {"gpus": 0, "GPU_STANDIN": 1.0} and m["gpu_task"]["cuda"] is False, m
        assert m["gpu_task"]["node"] not in ("?", "local")
    assert {m["id"]: m["outcome"] for m in doc["mutants"]} == {m["id"]: m["outcome"] for m in plain["mutants"]}
    assert next(m for m in doc["mutants"] if m["id"] == survivor)["cuda_only"] == "stand-in"  # not run on CUDA
    assert ray_processes(marked, wait=15) == []


# --- node ids (a pure check, between the two Ray tests so pytest-xdist gives them to different workers) -------------
def test_node_ids_are_shipped_relative_and_re_anchored_on_the_worker(tmp_path: Path) -> None:
    driver, worker = tmp_path / "driver" / "properties", tmp_path / "worker" / "properties"
    nodes = [f"{driver}/claims/test_a.py::test_claim_c1[SGLANG]", f"{tmp_path}/elsewhere/test_b.py::test_b"]
    shipped = remote.relative(driver, nodes)
    assert shipped == ("claims/test_a.py::test_claim_c1[SGLANG]", nodes[1])
    assert [remote.anchored(worker, n) for n in shipped] == [f"{worker}/claims/test_a.py::test_claim_c1[SGLANG]", nodes[1]]  # fmt: skip


# --- executor level: a worker killed mid-run, and a matrix of two fake systems --------------------------------------
@dataclass(frozen=True)
class KillsItsWorker:
    """A launcher that kills the Ray worker it runs in (SIGKILL, as the OOM killer does) on the task's first
    ``deaths`` attempts, each attempt's worker pid appended to ``seen``; after them, a cold run."""

    seen: str
    deaths: int

    def __call__(self, request, cmd, env, cwd, log):  # type: ignore[no-untyped-def]
        with open(self.seen, "a") as fh:
            fh.write(f"{os.getpid()}\n")
        if len(Path(self.seen).read_text().split()) <= self.deaths:
            os.kill(os.getpid(), signal.SIGKILL)
        return runner.cold(request, cmd, env, cwd, log)


@pytest.mark.extra("cluster")
@pytest.mark.slow
def test_a_killed_worker_is_retried_once_and_a_matrix_equals_the_local_pool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    passes = tmp_path / "test_passes.py"
    passes.write_text("def test_ok():\n    assert 1 + 1 == 2\n")
    request = runner.Request(System(), nodes=(str(passes),), plugins=("deferlab.properties.suite",), timeout=60)
    once, always = tmp_path / "once.txt", tmp_path / "always.txt"
    dying = [
        executor.Task("dies-once", request, launcher=KillsItsWorker(str(once), 1)),
        executor.Task("dies-always", request, launcher=KillsItsWorker(str(always), 99)),
    ]
    local = executor.run_all(executor.LocalExecutor(jobs=2), _matrix())
    assert all(o.ok for o in local.values()) and local["sglang"].record.tests and local["vllm"].record.rows

    marked = mark(monkeypatch)
    lines: list[str] = []
    on_ray = executor.run_all(executor.executor_for("local", say=lines.append, num_cpus=2), [*_matrix(), *dying])
    assert ray_processes(marked, wait=15) == []
    assert {k: _seen(o.record) for k, o in on_ray.items() if k in local} == {
        k: _seen(o.record) for k, o in local.items()
    }
    assert on_ray["sglang"].node != "local" and on_ray["sglang"].cuda is False

    revived = on_ray["dies-once"]  # its first worker killed mid-run: Ray ran it once more, on another worker
    pids = once.read_text().split()
    assert revived.ok and revived.record.tests and len(pids) == 2 and pids[0] != pids[1]
    lost = on_ray["dies-always"]  # killed on both attempts: the task's outcome, not a lost run
    assert not lost.ok and lost.record is None and lost.attempts == 2 and len(always.read_text().split()) == 2
    assert "Worker" in lost.error or "worker" in lost.error, lost.error


@pytest.mark.extra("cluster")
@pytest.mark.slow
def test_claims_tasks_ask_for_a_gpu_node_where_one_is_offered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """versions' and compare's claims tasks (`executor.on_gpu`) ask for the cluster's GPU when a node offers one
    (a custom resource stands in for it here): placed there, their records equal the local pool's and say that
    torch.cuda was absent where they ran; where none is offered they are left as they were."""
    marked = mark(monkeypatch)
    monkeypatch.setenv("DEFERLAB_GPU_RESOURCE", "GPU_STANDIN")
    lines: list[str] = []
    plain = executor.executor_for("local", say=lines.append, num_cpus=2)
    try:
        unchanged = executor.on_gpu(plain, _matrix(), lines.append)  # no node offers it
        assert [(t.key, t.gpus, t.resources) for t in unchanged] == [("sglang", 0, {}), ("vllm", 0, {})]
    finally:
        plain.close()
    ray = executor.executor_for("local", say=lines.append, num_cpus=2, resources={"GPU_STANDIN": 1.0})
    tasks = executor.on_gpu(ray, _matrix(), lines.append)
    assert all(t.resources == {"GPU_STANDIN": 1.0} for t in tasks) and any("a GPU node is there" in x for x in lines)
    on_gpu = executor.run_all(ray, tasks)
    local = executor.run_all(executor.LocalExecutor(jobs=2), _matrix())
    assert {k: _seen(o.record) for k, o in on_gpu.items()} == {k: _seen(o.record) for k, o in local.items()}
    assert all(o.cuda is False and o.node not in ("?", "local") for o in on_gpu.values())
    assert ray_processes(marked, wait=15) == []


# --- the front door -----------------------------------------------------------------------------------------------
def test_a_silent_cluster_is_one_line_within_30_s_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "out"
    t0 = time.perf_counter()
    rc = cli.main(["mutate", "--sglang", "0.5.23", "--cluster", "ray://127.0.0.1:1", "--out", str(out)])
    assert rc == 2 and time.perf_counter() - t0 < 30
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nobody answers at 127.0.0.1:1" in err[0], err
    assert not out.exists()
    assert cli.main(["mutate", "--sglang", str(FAKE), "--cluster", "nowhere", "--out", str(out)]) == 2
    assert cli.main(["mutate", "--sglang", str(FAKE), "--cluster", "ray://127.0.0.1:1", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "is no cluster address" in err[0] and "is a path on this machine" in err[1], err
    assert not out.exists()
