"""Imports the engine's own helper unguarded: a release tree without helper.py is damaged, not short of a dependency."""

from fakeeng.core.helper import triple


def six_times(x):
    return 2 * triple(x)
