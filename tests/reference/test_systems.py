"""`reference.system.systems`: the registry of systems under test, release order and claim order."""

from __future__ import annotations

import pytest

from deferlab.reference.system import claims as claim_registry
from deferlab.reference.system.errors import DeferlabInputError
from deferlab.reference.system.seam import LABELS
from deferlab.reference.system.systems import (
    ENGINES,
    System,
    claim_key,
    column,
    column_key,
    engine,
    is_release,
    release_key,
    sorted_claims,
    sorted_releases,
    split_column,
)


def test_release_order_is_pep_440() -> None:
    """The three orders the code had disagreed on ``0.5.6.post1``; PEP 440 puts it after 0.5.6, before 0.5.7,
    and 0.10.1.1 after 0.10.1; a spec that is not a version sorts last."""
    shuffled = ["0.10.1.1", "installed", "0.5.7", "0.5.6.post1", "0.10.1", "0.5.6", "0.5.6rc1"]
    assert sorted_releases(shuffled) == ["0.5.6rc1", "0.5.6", "0.5.6.post1", "0.5.7", "0.10.1", "0.10.1.1", "installed"]
    assert release_key("0.5.6.post1") > release_key("0.5.6") and not is_release("/src/sglang")


def test_claim_order_is_numeric_then_other_units() -> None:
    assert sorted_claims(["P:test_x", "C10", "C2", "C1", "C10"]) == ["C1", "C2", "C10", "P:test_x"]
    assert claim_key("C9") < claim_key("C10")


def test_columns_round_trip_and_order_engines_then_releases() -> None:
    cols = [
        column("vllm", "0.33.0"),
        column("sglang", "0.5.23"),
        column("sglang", "0.5.6.post1"),
        column("vllm", "0.9.0.1"),
    ]
    assert [split_column(c) for c in cols] == [
        ("vllm", "0.33.0"),
        ("sglang", "0.5.23"),
        ("sglang", "0.5.6.post1"),
        ("vllm", "0.9.0.1"),
    ]
    assert sorted(cols, key=column_key) == ["0.5.6.post1", "0.5.23", "vllm-0.9.0.1", "vllm-0.33.0"]


def test_the_labels_are_the_registrys_and_the_claim_sets_agree_with_claims_toml() -> None:
    """One place for an engine's facts: the seam's labels come from it, and the claims it says vLLM answers are
    exactly those claims.toml states vLLM expectations for."""
    assert LABELS == {name: facts.label for name, facts in ENGINES.items()}
    stated = {cid for cid, c in claim_registry.load_claims().items() if any(r.engine == "vllm" for r in c.engines)}
    assert set(engine("vllm").claims or ()) == stated
    assert engine("sglang").claims is None and engine("SGLang").display == "SGLang"


def test_a_system_is_validated_where_it_is_made() -> None:
    assert System().key == "model" and System(impl="m:o").key == "model:m:o" and not System().real
    s = System("sglang", "0.5.23")
    assert s.key == "sglang:0.5.23" and s.label == "SGLANG" and s.pytest_options() == ["--sglang", "0.5.23"]
    assert System("vllm", "0.33.0").suite == "claims" and not System("vllm", "x").answers("C1")
    assert System("sglang", "0.5.23", family="internvl").key == "internvl/sglang:0.5.23"
    assert not System("vllm", "0.34.0", family="gemma3").answers("C13") and System(family="gemma3").answers("C15")
    with pytest.raises(DeferlabInputError, match="unknown engine 'trt'; accepted: sglang, vllm, lmdeploy"):
        System("trt", "1.0")
    with pytest.raises(DeferlabInputError, match="a SPEC is needed"):
        System("sglang")
