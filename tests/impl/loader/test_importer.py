"""`impl.loader.importer`: bare packages, stand-ins only for unguarded imports, required modules fail loudly."""

from __future__ import annotations

from tests.impl.loader.support import run

PROBE = """
import dataclasses, importlib
from deferlab.impl.loader import sources
s = sources.load(FAKE, sys.argv[1])
unguarded = s.module("fakeeng.core.unguarded")
guarded = s.module("fakeeng.core.guarded")
broken = importlib.import_module("fakeeng.core.broken")
out = {
    "records": [r.as_dict() for r in s.stand_ins],
    "guarded_has_dep": guarded.HAS_DEP,
    "broken_before": broken.BEFORE,
    "broken_later_is_standin": getattr(broken.LATER, "__deferlab_standin__", False),
    "missing_in_sys_modules": MISSING in sys.modules,
}
try:
    s.module("fakeeng.core.broken")
except Exception as e:
    out["required_broken"] = f"{type(e).__name__}: {e}"
print("JSON:" + json.dumps(out))
"""


def test_stand_ins_only_where_the_import_is_unguarded():
    got = run(PROBE)
    missing = [r for r in got["records"] if r["kind"] == "missing"]
    assert [r["module"] for r in missing] == ["deferlab_fake_missing_dep"]  # once: the guarded import got none
    assert "imported unguarded at fakeeng/core/unguarded.py:3" in missing[0]["why"]
    assert got["guarded_has_dep"] is False  # its own fallback ran
    assert got["missing_in_sys_modules"] is False  # hidden again once the importing module was done


def test_packages_stay_bare_and_a_failing_body_keeps_what_it_defined():
    got = run(PROBE)
    kinds = {(r["module"], r["kind"]) for r in got["records"]}
    assert {("fakeeng", "bare"), ("fakeeng.core", "bare")} <= kinds  # the raising package init never ran
    failed = [r for r in got["records"] if r["kind"] == "failed"]
    assert [r["module"] for r in failed] == ["fakeeng.core.broken"]
    assert failed[0]["why"] == "RuntimeError: this body needs a GPU (at fakeeng/core/broken.py:5)"
    assert got["broken_before"] == "real" and got["broken_later_is_standin"] is True
    assert got["required_broken"] == "RequiredImportError: fakeeng.core.broken: RuntimeError: this body needs a GPU"


def test_a_required_module_that_fails_is_the_engines_error_naming_it():
    got = run(
        """
        import dataclasses
        from deferlab.impl.loader import sources
        from deferlab.impl.loader.engine import SourceError
        engine = dataclasses.replace(FAKE, required=("fakeeng.core.required", "fakeeng.core.broken"))
        try:
            sources.load(engine, sys.argv[1])
        except SourceError as e:
            print("JSON:" + json.dumps({"error": str(e), "type": type(e).__name__}))
        """
    )
    assert got["type"] == "SourceError" and "\n" not in got["error"]
    assert got["error"].startswith("fakeeng source ")
    assert got["error"].endswith(
        "importing fakeeng.core.broken failed inside FakeEng: RuntimeError: this body needs a GPU"
    )
