"""The ``deferlab`` CLI and its report: it only composes what the other packages provide.

Modules: `cli` (argument parsing, exit codes), `runner` (the report's steps,
written atomically), `steps` (failure-tolerant step runner), `claims`
(verdicts file, property-suite subprocess), `sweeps` (the gate's boundary
sweeps: `compute`, and their report records and regression counters:
`collect`), `simulation` (sim scenarios, IPC verdicts), `benchmarks`,
`regressions` (baseline comparison), `plots` (figures: `figures`, `sim`),
`versions` (the release matrix: `matrix`, `cli`, `render`), `render`
(report.md), `atomic` (crash-safe writes), `environment`. Schemas: SCHEMA.md.
"""
