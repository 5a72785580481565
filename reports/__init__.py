"""The ``deferlab`` CLI and its report: it only composes what the other packages provide.

Modules: `cli` (argument parsing, exit codes), `runner` (the report's steps,
written atomically), `steps` (failure-tolerant step runner), `claims`
(verdicts file, property-suite subprocess), `sweeps` / `sweep_report` (gate
boundary sweeps and their regression counters), `gate_source` (which gate the
sweeps call), `simulation` (sim scenarios, IPC verdicts), `benchmarks`,
`regressions` (baseline comparison), `plots` / `plots_sim` (figures), `render`
(report.md), `atomic` (crash-safe writes), `environment`. Schemas: SCHEMA.md.
"""
