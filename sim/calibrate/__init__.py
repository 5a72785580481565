"""``deferlab calibrate``: measure the simulator's host-side costs here by running the real operations, and
build the cost profile they imply (next to the shipped profiles in ``sim/profiles/``).

Not imported by ``import sim``: it runs torch and ``impl`` on purpose, which the simulator itself never does."""
