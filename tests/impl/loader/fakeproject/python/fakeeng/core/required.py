"""A module the fake driver runs: pure Python, imports for real."""


def double(x):
    return 2 * x
