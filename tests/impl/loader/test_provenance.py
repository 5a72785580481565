"""`impl.loader.provenance`: one record per (module, kind), and a description listing every stand-in."""

from __future__ import annotations

from types import SimpleNamespace

from deferlab.impl.loader.provenance import Records, StandIn, describe
from tests.impl.loader.support import run


def test_records_keep_the_first_of_each_module_and_kind():
    records = Records()
    records.add("a", "missing", "first")
    records.add("a", "missing", "second")
    records.add("a", "patched", "swapped")
    assert records == [StandIn("a", "missing", "first"), StandIn("a", "patched", "swapped")]
    assert records[1].as_dict() == {"module": "a", "kind": "patched", "why": "swapped"}


def test_describe_lists_every_stand_in_of_the_loaded_tree():
    got = run(
        """
        from deferlab.impl.loader import sources
        from deferlab.impl.loader.provenance import describe
        s = sources.load(FAKE, sys.argv[1])
        s.module("fakeeng.core.unguarded")
        s.patch("fakeeng.core.required.double", "a test swaps it")
        print("JSON:" + json.dumps(describe(s, "fake-run")))
        """
    )
    assert got["name"] == "fake-run" and got["version"] == "1.2.3" and got["kind"] == "checkout"
    assert got["commit"] is None or len(got["commit"]) == 40
    kinds = [(r["module"], r["kind"]) for r in got["stand_ins"]]
    assert kinds == [
        ("fakeeng", "bare"),
        ("fakeeng.core", "bare"),
        ("deferlab_fake_missing_dep", "missing"),
        ("fakeeng.core.required.double", "patched"),
    ]
    assert all(r["why"] for r in got["stand_ins"])
    plain = SimpleNamespace(name="n", version="v", kind="k", spec="s", root="r", git_rev=None, load_seconds=None)
    assert describe(SimpleNamespace(**vars(plain), stand_ins=[]))["load_seconds"] == 0.0
