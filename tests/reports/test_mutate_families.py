"""``deferlab mutate --vllm TREE --model FAMILY`` on the fake vLLM: the family's claim columns run, its default
targets come from those columns' provenance (the device path's ``fused_normalize``), a companion's names are never
a target, and a mutant of the device path is seen by the family's claims.

The fake (``mutate_fake/claims_vllm.py``) records, under ``--model``, the columns a family session records
(``qwen3-vl:VLLM`` and ``qwen3-vl:VLLM host-normalized``), their provenance naming transformers' processor
beside the engine's functions; the fake tree holds a ``Processor.__call__`` a careless reading of that name would
pick.
"""

from __future__ import annotations

import pytest

pytest.importorskip("cosmic_ray", reason="deferlab mutate's operators are the deferlab[mutate] extra (cosmic-ray)")

from pathlib import Path

from deferlab.reference.system.errors import UsageError
from deferlab.reference.system.systems import System
from deferlab.reports.core.runner import RunRecord
from deferlab.reports.mutate import runs as mutate_run
from deferlab.reports.mutate import select
from tests.reports.mutate_fake.fakes import VLLM_FAKE, FakeVLLMHarness
from tests.reports.test_mutate_engines import _cache, _run  # noqa: F401 - the fixture, autoused here too

pytestmark = pytest.mark.extra("mutate")  # selected by CI's `-m extra` phase, skipped (naming it) without

SERVED = "vllm/multimodal/served.py"


def test_a_family_campaign_runs_its_columns_and_mutates_what_they_name(tmp_path: Path) -> None:
    harness = FakeVLLMHarness()
    rc, doc = _run(tmp_path, "vllm", VLLM_FAKE, "--model", "qwen3-vl", "--sample", "30", "--seed", "1", harness=harness)
    assert rc == 0 and harness.family == "qwen3-vl" and harness.warm is False
    targets = [t["target"] for t in doc["targets"]]
    assert f"{SERVED}:fused_normalize" in targets and f"{SERVED}:normalize" in targets
    assert not any("Processor" in t for t in targets), targets  # transformers' __call__ named none of the engine's
    verdicts = doc["reference"]["verdicts"]
    assert verdicts["C15"].startswith("qwen3-vl:VLLM=") and "qwen3-vl:VLLM host-normalized=" in verdicts["C15"]
    assert set(verdicts) == {"C4", "C13", "C15"}
    fused = [m for m in doc["mutants"] if m.get("function") == "fused_normalize"]
    assert fused and any(m["outcome"] == "killed" and {"C4", "C15"} & set(m["killed_by"]) for m in fused), fused


def test_an_unknown_family_is_refused_before_anything_loads(tmp_path: Path) -> None:
    harness = FakeVLLMHarness()
    with pytest.raises(UsageError, match=r"--model: unknown model family 'qwen9'; accepted: kimi-k3, qwen2\.5-vl"):
        _run(tmp_path, "vllm", VLLM_FAKE, "--model", "qwen9", harness=harness)
    assert harness.runs == [] and not (tmp_path / "out").exists()


def test_a_claim_with_several_columns_is_judged_on_each() -> None:
    """`runs.claims_of` joins a claim's columns, so a mutant moving only the host path's verdict is seen."""

    def record(host: str) -> RunRecord:
        rows = [{"id": "C15", "policy": "qwen3-vl:VLLM", "verdict": "fails", "evidence": "AssertionError: x"},
                {"id": "C15", "policy": "qwen3-vl:VLLM host-normalized", "verdict": host, "evidence": "ok"}]  # fmt: skip
        return RunRecord(System("vllm", "t", family="qwen3-vl"), "ci", rows=rows, wrote=True)

    before, after = mutate_run.claims_of(record("holds"))["C15"], mutate_run.claims_of(record("fails"))["C15"]
    assert before["verdict"] == "qwen3-vl:VLLM=fails; qwen3-vl:VLLM host-normalized=holds"
    assert before["verdict"] != after["verdict"]


def test_family_modules_are_the_engines_code_and_a_companions_names_resolve_to_nothing(tmp_path: Path) -> None:
    assert select.family_modules("vllm", "kimi-k3") == []
    found = select.family_modules("vllm", "qwen3-vl")
    assert "vllm.model_executor.models.qwen3_vl" in found and all(m.startswith("vllm.") for m in found)
    assert "sglang.srt.multimodal.processors.internvl" in select.family_modules("sglang", "all")
    index = select.CodeIndex.build(VLLM_FAKE, ["vllm.multimodal.served.fused_normalize"], "vllm")
    assert f"{SERVED}:fused_normalize" in index.funcs  # a function's path indexes its module
    text = "real: transformers transformers.models.qwen2_vl.image_processing_qwen2_vl.Qwen2VLImageProcessor.__call__"
    assert index.resolve(text) == set()
    assert index.resolve("real: vllm.multimodal.served.Processor.__call__") == {f"{SERVED}:Processor.__call__"}
