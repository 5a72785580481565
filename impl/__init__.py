"""The system under test in torch: eager and owner-deferred preprocessing (SPEC 1-8).

Runs on CUDA when present, on the CPU otherwise. May import the shared types
of `reference.config`, `reference.profiles` and `reference.contract`, never
the reference's algorithms.
"""
