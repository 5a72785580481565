"""Property 3 catches a one-token break in real SGLang's gate (the seam proof of ``claims/test_seam.py``, on real code).

Why here and not with the claims: it patches SGLang's own gate (``<=`` to
``<``, `impl.sglang.broken.BrokenSGLangGateTie`) and checks the property's
check function finds the tie while the shipped gate passes it, which tests
deferlab's driver and property together, not a claim about the system. The
wheel is loaded as the other SGLang tests load it (a skip only when it cannot
be fetched).
"""

from __future__ import annotations

from typing import Any

from hypothesis import settings

from deferlab.impl.sglang.broken import BrokenSGLangGateTie
from deferlab.impl.sglang.driver import SGLangImpl
from deferlab.properties import claimcheck
from deferlab.properties.claims.test_gate import check_gate_matches_bytes, gate_requests
from deferlab.reference.system.seam import SGLANG_LABEL
from tests.impl.sglang.support import default_spec, load_or_skip


def _real_sglang() -> Any:
    """The real SGLang driver (``DEFERLAB_SGLANG``, default 0.5.23), or a skip when its wheel cannot be fetched."""
    return load_or_skip(SGLangImpl, default_spec())


def test_property_3_catches_a_one_line_break_in_real_sglang(impl):
    """SGLang's own gate with ``<=`` patched to ``<`` (ties stay eager) fails property 3 on an input that the
    shipped gate passes: the property that owns the gate catches a one-token change in the real code."""
    real = _real_sglang()
    broken = BrokenSGLangGateTie(real.source)
    budget = max(settings.default.max_examples, 300)
    found = claimcheck.find_counterexample(
        gate_requests(), lambda req: check_gate_matches_bytes(broken, SGLANG_LABEL, *req), max_examples=budget
    )
    assert found is not None, f"property 3 did not catch the broken SGLang gate in {budget} examples"
    assert "decisions" in found.error, found.error
    assert claimcheck.failure_of(lambda req: check_gate_matches_bytes(real, SGLANG_LABEL, *req), found.value) is None, (
        f"the shipped SGLang gate fails the counterexample too: {found.value!r}"
    )
