"""Expected wall time past one machine, on paper, from measured task times (the cluster issue's scaling table).

What it reads: a campaign's store (``campaign.sqlite``: each finished mutant's measured seconds, the reference
run's wall seconds, which stays on the driver) and a versions run (``versions.json``: each release's seconds).
What it assumes (printed with the table): a mutant not yet run costs the mean of those that ran; every machine has
``--slots`` task slots (one CPU per task, 2-core machines as the project's); each cluster start costs ``--start``
seconds (measured: 9.5 s for local Ray); a release of the full matrix costs what the measured release of its
engine did. The makespan is the longest-processing-time-first schedule over machines x slots, a standard bound
within 4/3 of the optimum; no network or wheel-fetch time is modelled (each worker fetches each release once).

    python scripts/cluster_scaling.py --campaign reports/out/mutate-seed-full --population 602 \
        --default-mutants 100 --versions reports/example/versions-newest/versions.json --releases sglang=7,vllm=8
"""

from __future__ import annotations

import argparse
import heapq
import json
import sqlite3
from pathlib import Path


def makespan(tasks: list[float], workers: int) -> float:
    """Longest-processing-time-first: each task, longest first, to the worker free earliest."""
    free = [0.0] * max(1, workers)
    heapq.heapify(free)
    for t in sorted(tasks, reverse=True):
        heapq.heappush(free, heapq.heappop(free) + t)
    return max(free)


def campaign(store: Path) -> tuple[list[float], float]:
    """(the finished mutants' seconds, the reference run's wall seconds) of a campaign's store."""
    db = sqlite3.connect(f"file:{store / 'campaign.sqlite'}?mode=ro", uri=True)
    done = [s for (s,) in db.execute("select seconds from mutant where outcome is not null and seconds > 0")]
    reference = json.loads(db.execute("select body from doc where name='reference'").fetchone()[0])
    return done, float(reference.get("wall_seconds") or sum(reference.get("seconds", {}).values()))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--campaign", type=Path, required=True)
    p.add_argument("--population", type=int, required=True, help="mutants of the full campaign")
    p.add_argument("--default-mutants", type=int, default=100, help="mutants of the default campaign")
    p.add_argument("--default-seconds", type=float, default=None,
                   help="the default campaign's measured mean seconds a mutant (its own mix of targets); default: "
                   "the campaign store's mean")  # fmt: skip
    p.add_argument("--versions", type=Path, required=True)
    p.add_argument("--releases", default="sglang=7,vllm=8", help="releases of the full matrix per engine")
    p.add_argument("--slots", type=int, default=2)
    p.add_argument("--start", type=float, default=9.5)
    p.add_argument("--machines", default="1,4,16")
    args = p.parse_args()
    done, reference = campaign(args.campaign)
    mean = sum(done) / len(done)
    secs = json.loads(args.versions.read_text())["seconds"]
    per_engine = {("vllm" if k.startswith("vllm") else "sglang"): v for k, v in secs.items()}
    matrix = [per_engine[e] for e, n in (x.split("=") for x in args.releases.split(",")) for _ in range(int(n))]
    jobs = {
        f"default campaign ({args.default_mutants} mutants)": ([args.default_seconds or mean] * args.default_mutants, reference),
        f"full campaign ({args.population} mutants)": (done + [mean] * max(0, args.population - len(done)), reference),
        f"full matrix ({len(matrix)} releases, every family)": (matrix, 0.0),
    }  # fmt: skip
    machines = [int(m) for m in args.machines.split(",")]
    print(f"measured: {len(done)} mutants, mean {mean:.1f} s (a mutant not run yet counts as the mean); reference "
          f"{reference:.0f} s on the driver; releases {', '.join(f'{k} {v:.0f} s' for k, v in secs.items())}; "
          f"{args.slots} slots a machine; cluster start {args.start} s")  # fmt: skip
    print("| work | " + " | ".join(f"{m} machine{'s' if m > 1 else ''}" for m in machines) + " |")
    print("|---|" + "---|" * len(machines))
    for name, (tasks, serial) in jobs.items():
        cells = [(serial + makespan(tasks, m * args.slots) + (args.start if m > 1 else 0)) / 60 for m in machines]
        print(f"| {name} | " + " | ".join(f"{c:.0f} min" for c in cells) + " |")


if __name__ == "__main__":
    main()
