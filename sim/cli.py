"""``deferlab sim SCENARIO [--json]``: run a scenario and print a table (or the JSON result).

Also ``--list`` (shipped scenarios), ``--ipc [BUDGET]`` (claim C9 verdicts)
and ``--anchors`` (model vs the PR's reported numbers, for every shipped cost
profile, or the one ``--cost-profile`` names: a shipped name or a TOML path such
as the one ``deferlab calibrate`` writes). Returns a process exit code: 0 ok,
2 bad input, refused before anything runs in one ``deferlab: error:`` line naming the option (or the file and
key), the value and what is accepted.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from deferlab.reference.system.errors import ProfileError, UsageError
from deferlab.sim.corpus import CorpusMissing
from deferlab.sim.scenario import ScenarioError, list_scenarios, load_scenario


def _fmt(v: object) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, list):
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    return str(v)


def _table(rows: list[tuple[str, object]], title: str) -> str:
    width = max((len(k) for k, _ in rows), default=0)
    lines = [title, "-" * len(title)]
    lines += [f"{k.ljust(width)}  {_fmt(v)}" for k, v in rows]
    return "\n".join(lines)


def _grid(rows: list[dict], keys: list[str], title: str) -> str:
    cells = [[_fmt(r.get(k)) for k in keys] for r in rows]
    widths = [max(len(k), *(len(c[i]) for c in cells)) for i, k in enumerate(keys)]
    out = [title, "-" * len(title), "  ".join(k.ljust(w) for k, w in zip(keys, widths, strict=True))]
    out += ["  ".join(c.ljust(w) for c, w in zip(cell, widths, strict=True)) for cell in cells]
    return "\n".join(out)


def render(result: dict) -> str:
    """The human-readable report of a `SimResult.to_dict()`."""
    sc = result["scenario"]
    parts = [f"scenario {sc['name']}: {sc['description']}", f"policy {sc['policy']}, topology {sc['topology']}"]
    if result.get("skipped"):
        parts.append(f"SKIPPED: {result['skipped']}")
        return "\n".join(parts)
    acc = dict(result["accounting"])
    alt = acc.pop("payload_alternatives_bytes")
    parts.append(_table(list(acc.items()), "accounting (bytes, copies, runs; per-rank lists by global rank)"))
    parts.append(_table(list(alt.items()), "payload alternatives (bytes, whole workload)"))
    if result["placement"]:
        keys = ["strategy", "requests", "cost_imbalance_mean", "cost_imbalance_max", "patch_imbalance_mean"]
        parts.append(_grid(result["placement"], keys + ["padding_tokens_mean"], "owner placement"))
    lat = result.get("latency")
    if lat:
        keys = ["ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "throughput_rps"]
        rows = [{"mode": m, **{k: lat[m].get(k) for k in keys}} for m in ("eager", "deferred")]
        rows.append({"mode": "change %", **lat["change_pct"]})
        parts.append(_grid(rows, ["mode", *keys], "latency (DES)"))
    if result.get("sweep"):
        caps = result["sweep"][0].get("capacity_rps", {})
        if caps:
            parts.append(
                f"capacity (requests/s at unlimited concurrency): eager {_fmt(caps['eager'])}, deferred {_fmt(caps['deferred'])}"
            )
        rows = [
            {
                "rate_rps": r["rate_rps"],
                "eager_p50": r["eager"]["ttft_p50_s"],
                "deferred_p50": r["deferred"]["ttft_p50_s"],
                "eager_p90": r["eager"]["ttft_p90_s"],
                "deferred_p90": r["deferred"]["ttft_p90_s"],
                "eager_rps": r["eager"]["throughput_rps"],
                "deferred_rps": r["deferred"]["throughput_rps"],
            }
            for r in result["sweep"]
        ]
        parts.append(_grid(rows, list(rows[0]), "load sweep (TTFT s, throughput requests/s)"))
    for note in result.get("notes", []):
        parts.append(f"note: {note}")
    return "\n\n".join(parts)


def render_anchors(rows: list[dict]) -> str:
    """One line per anchor and (profile, topology): model vs reported; then what would close each gap."""
    out = []
    for r in rows:
        unit = "x" if "model_x" in r else "%"
        model, rep = r.get("model_x", r.get("model_pct")), r.get("reported_x", r.get("reported_pct"))
        real = f"  real impl run here {r['real_impl_x']:.2f}x" if "real_impl_x" in r else ""
        flag = "" if r["same_direction"] else "  (opposite sign)"
        out.append(
            f"{r['profile']:<16} {r['topology']:<34} {r['anchor'][:40]:<40} model {model:+8.1f}{unit} "
            f"reported {rep:+8.1f}{unit}{flag}{real}"
        )
    out.append("")
    for r in rows:
        out.append(f"[{r['profile']} | {r['topology']} | {r['anchor']}]\n  gap: {r['gap']}\n  needed: {r['needed']}")
    return "\n".join(out)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's wording, as the front door's one line (exit 2, no SystemExit)
        self.print_usage(sys.stderr)
        raise UsageError(message)


def check_cost_profile(value: str) -> str:
    """``--cost-profile``: a shipped profile's name or the path of a .toml file that exists, whose constants are
    all there and valid (`sim.costmodel.load_cost_model`); `UsageError` in one line otherwise."""
    from deferlab.sim.costmodel import load_cost_model, shipped_profiles

    shipped = shipped_profiles()
    accepted = f"accepted: a shipped profile ({', '.join(shipped)}) or the path of a .toml file"
    path = Path(value).expanduser()
    if value not in shipped:
        if path.suffix != ".toml":
            raise UsageError(f"--cost-profile {value!r}: neither a shipped profile nor a .toml file; {accepted}")
        if not path.exists():
            raise UsageError(f"--cost-profile {value!r}: no such file; {accepted}")
        if not path.is_file():
            raise UsageError(f"--cost-profile {value!r}: not a file; {accepted}")
    try:
        load_cost_model(value)
    except ProfileError as e:
        raise UsageError(f"--cost-profile {value!r}: {e}") from None
    return value


def _check(args: argparse.Namespace) -> None:
    """One mode at a time, each option where it is used, every value checked: before anything runs."""
    modes = [m for m, on in (("SCENARIO", args.scenario), ("--list", args.list), ("--ipc", args.ipc is not None),
                             ("--anchors", args.anchors)) if on]  # fmt: skip
    if len(modes) > 1:
        raise UsageError(
            f"{modes[1]}: not allowed with {modes[0]}; accepted: one of SCENARIO, --list, --ipc, --anchors"
        )
    if not modes:
        raise UsageError(
            "SCENARIO: none given; accepted: a scenario file or shipped name, or --list / --ipc / --anchors"
        )
    if args.ipc is not None and args.ipc < 1:
        raise UsageError(f"--ipc {args.ipc}: not a budget; accepted: an int >= 1 (examples per check; default 60)")
    if args.cost_profile is not None:
        if modes[0] not in ("SCENARIO", "--anchors"):
            raise UsageError(f"--cost-profile: not used with {modes[0]}; accepted with SCENARIO or --anchors")
        check_cost_profile(args.cost_profile)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``deferlab sim``; ``argv`` excludes the subcommand name."""
    try:
        return _main(argv)
    except UsageError as e:
        print(f"deferlab: error: {e}", file=sys.stderr)
        return 2


def _main(argv: Sequence[str] | None) -> int:
    parser = _Parser(prog="deferlab sim", description=__doc__.splitlines()[0])
    parser.add_argument("scenario", nargs="?", help="a scenario TOML file, or a shipped scenario's name")
    parser.add_argument("--json", action="store_true", help="print the SimResult as JSON")
    parser.add_argument("--list", action="store_true", help="list the shipped scenarios")
    parser.add_argument("--ipc", nargs="?", const=60, type=int, metavar="BUDGET", help="IPC verdicts (claim C9)")
    parser.add_argument("--anchors", action="store_true", help="model vs the PR's reported numbers, per cost profile")
    parser.add_argument("--cost-profile", metavar="NAME|FILE", help="cost profile: a shipped name or a TOML path")
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    _check(args)
    if args.list:
        for p in list_scenarios():
            print(p.stem, "\t", p)
        return 0
    if args.ipc is not None:
        from deferlab.sim.ipc.claim import verdicts

        rows = verdicts(args.ipc)
        if args.json:
            print(json.dumps(rows, indent=2))
        else:
            for r in rows:
                ce = r["counterexample"]
                where = (
                    f"  smallest: {ce['topology']} in {len(ce['sequence']) - 1} steps: {ce['message']}" if ce else ""
                )
                print(f"{r['policy']:<16} {r['property']:<9} {r['verdict']:<6} [{r['assumptions']}]{where}")
        return 0
    if args.anchors:
        from deferlab.sim.anchors import compare_profiles

        rows = compare_profiles([args.cost_profile] if args.cost_profile else None)
        print(json.dumps(rows, indent=2) if args.json else render_anchors(rows))
        return 0
    from deferlab.sim.runner import run

    try:
        scenario = load_scenario(args.scenario)
    except (ScenarioError, ProfileError, FileNotFoundError, CorpusMissing) as e:
        raise UsageError(str(e)) from None  # it names the file (or the shipped name) and the key
    result = run(scenario, cost_profile=args.cost_profile).to_dict()
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
