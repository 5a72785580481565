"""Imports a third-party module nobody has, unguarded: the loader stands in for it."""

import deferlab_fake_missing_dep as dep


def uses_dep():
    return dep.compute(1)


KERNEL = dep.jit
