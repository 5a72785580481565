"""`impl.sglang.broken.BrokenSGLangGateTie`: the real gate with one token changed is caught, and undone."""

from __future__ import annotations

from deferlab.impl.sglang.broken import BrokenSGLangGateTie
from tests.impl.sglang.support import L1, u8


def test_the_seam_accepts_it_and_a_one_line_break_is_caught(sgl):
    from deferlab.properties.seam import resolve_impl

    assert resolve_impl(sgl) is sgl
    broken = BrokenSGLangGateTie(sgl.source)
    assert resolve_impl(broken) is broken and broken.name == f"{sgl.name}-broken-gate-tie"
    tie = [u8(3, 112, 28)]
    assert sgl.defer_decisions(tie, L1, policy=None) == [True]
    assert broken.defer_decisions(tie, L1, policy=None) == [
        False
    ]  # semantics §4: ties defer; the break keeps them eager
    assert sgl.defer_decisions(tie, L1, policy=None) == [True]  # the real class was restored
    assert broken.gate_paths(None) == sgl.gate_paths(None)  # the facts still measure the shipped code
