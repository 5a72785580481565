"""`impl.sglang.shims`: the functional msgspec stand-in builds and copies Structs as msgspec does."""

from __future__ import annotations

import copy
import pickle

import pytest

from deferlab.impl.sglang import shims


def _module():
    return shims.build_msgspec("msgspec")


class Point(_module().Struct):
    x: int
    y: int = 0
    tags: list = _module().field(default_factory=list)


def test_a_struct_has_fields_defaults_and_factories():
    p = Point(1)
    assert (p.x, p.y, p.tags) == (1, 0, [])
    assert Point(1, 2) == Point(x=1, y=2) and Point(1).tags is not Point(1).tags
    ms = _module()
    assert [f.name for f in ms.structs.fields(Point)] == ["x", "y", "tags"]
    assert ms.structs.asdict(ms.structs.replace(p, y=5)) == {"x": 1, "y": 5, "tags": []}
    assert copy.copy(p) == p and pickle.loads(pickle.dumps(p)) == p


def test_frozen_refuses_assignment_and_one_module_per_name():
    class Frozen(_module().Struct, frozen=True):
        a: int

    f = Frozen(1)
    with pytest.raises(AttributeError):
        f.a = 2
    assert hash(f) == hash(Frozen(1))
    assert shims.build_msgspec("msgspec") is shims.build_msgspec("msgspec")
    assert set(shims.FUNCTIONAL) == {"msgspec", "msgspec.structs", "pybase64"}


def test_the_pybase64_stand_in_decodes_as_its_contract_says():
    """SGLang calls ``pybase64.b64decode(s, validate=True)`` on a data URI's payload (semantics §20.8): the stand-in
    gives the same bytes for valid base64 and refuses invalid characters under ``validate``."""
    import base64
    import binascii

    mod = shims.build_pybase64("pybase64")
    data = bytes(range(256))
    text = base64.b64encode(data).decode("ascii")
    assert mod.b64decode(text, validate=True) == data and mod.b64decode(text.encode(), validate=True) == data
    with pytest.raises(binascii.Error):
        mod.b64decode(text[:-4] + "!!==", validate=True)
    assert mod.b64encode(data) == text.encode()
