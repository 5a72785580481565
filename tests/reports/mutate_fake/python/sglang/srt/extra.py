"""A fake engine module no claim and no unit test of the fake checkout touches."""


def half(x):
    return x // 2
