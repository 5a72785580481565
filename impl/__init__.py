"""The system under test in torch: eager and owner-deferred preprocessing (semantics §1-§8).

Runs on CUDA when present, on the CPU otherwise. May import the shared types
and descriptions (`reference.system.config`, `reference.system.profiles`, `reference.system.contract`,
`reference.system.policies`) and the front door (`reference.system.validate`,
`reference.system.errors`), never the reference's algorithms.

Module map (one operation per function; nothing is re-exported here, so that
``import impl.placement`` stays torch-free for the simulator):

* steps: `staging` (semantics §3.1), `navit` (3.2), `resize` (3.3), `background` (3.4),
  `normalize` (3.5), `pipeline` (3.6 grouping; ``preprocess``);
* tokenizer side: `gate` (4), `producer` (5), `processor` (``Processor``), `validation` (HARDENED);
* wire: `items` (item + ``KimiK3DeferredPreprocessing``), `transport` (cpu / IPC), `ipc` (8);
* scheduler side: `scheduler` (whitelist, H2D), `consumer` (5), `placement` (7),
  `model` (``materialize``, ``get_image_features``);
* `policy`: the switchable upstream versions; `device`: ``device=None`` resolution.
"""
