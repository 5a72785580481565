"""`impl.loader.standins`: scaffolding during the import phase, `StandInUsedError` once it is over."""

from __future__ import annotations

from deferlab.impl.loader import standins
from tests.impl.loader.support import run


def test_a_stand_in_is_permissive_while_importing():
    mod = standins.StandInModule("somewhere")
    cls = mod.thing
    assert standins.is_standin(cls) and mod.thing is cls and not standins.is_standin(object())

    def kernel():
        return 1

    # Inside a module body stand-ins may be called, whether or not this process (an xdist worker that loaded an
    # engine in-process, say) has ended its import phase.
    with standins.module_body():
        assert standins.importing()
        assert cls(kernel) is kernel  # a bare decorator keeps the function real
        assert bool(cls()) is False and list(cls()) == []


def test_a_stand_in_called_after_the_import_phase_raises_naming_it():
    got = run(
        """
        from deferlab.impl.loader import sources
        s = sources.load(FAKE, sys.argv[1])
        mod = s.module("fakeeng.core.unguarded")
        try:
            mod.uses_dep()
        except Exception as e:
            print("JSON:" + json.dumps({"error": f"{type(e).__name__}: {e}", "kernel": mod.KERNEL.__qualname__}))
        """
    )
    assert got["kernel"] == "deferlab_fake_missing_dep.jit"  # built at import: allowed
    assert got["error"] == (
        "StandInUsedError: deferlab_fake_missing_dep.compute is a deferlab stand-in (its module is missing or "
        "failed to import here); FakeEng code called it at run time, so this path cannot run for real on this machine"
    )
