"""``deferlab report --vllm SPEC --model FAMILY``: the claim table has the family's columns, with the verdicts
semantics §18.7 predicts, and no Kimi-K3 column when Kimi-K3 was not asked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deferlab.reference.system.systems import System
from deferlab.reports.core.runner import RunRecord
from deferlab.reports.report import claims


def test_a_real_engine_must_answer_the_default_column_of_each_family_it_serves() -> None:
    assert claims.columns(RunRecord(System("sglang", "0.5.23"), "ci"))[0] == ["SGLANG"]
    required, _ = claims.columns(RunRecord(System("sglang", "0.5.23", family="all"), "ci"))
    assert required == [
        "SGLANG",
        "qwen2.5-vl:SGLANG",
        "qwen3-vl:SGLANG",
        "internvl:SGLANG",
        "glm-4.1v:SGLANG",
        "gemma4:SGLANG",
        "paddleocr-vl:SGLANG",
        "minicpm-v-4.6:SGLANG",
        "ernie-4.5-vl:SGLANG",
        "mimo-v2.5:SGLANG",
        "step3-vl:SGLANG",
    ]
    # no gemma3: not served by SGLang (PaddleOCR-VL is, from 0.5.21; MiniCPM-V 4.6, ERNIE-4.5-VL, MiMo-V2.5: §18.9)
    required, _ = claims.columns(RunRecord(System("vllm", "0.33.0", family="gemma3,glm-4.1v"), "ci"))
    assert required == ["glm-4.1v:VLLM"]  # Gemma 3 is device-normalized from 0.34.0 (the registry's range)


def test_a_family_column_without_a_row_is_not_run_and_a_claim_it_does_not_answer_is_n_a() -> None:
    record = RunRecord(System("vllm", "0.34.0", family="gemma3"), "ci")
    table = {(r["id"], r["policy"]): r["verdict"] for r in claims.claim_table([record], {"C4": {}, "C13": {}})}
    assert table == {("C4", "gemma3:VLLM"): "not-run", ("C13", "gemma3:VLLM"): "n/a"}


@pytest.mark.slow
@pytest.mark.extra("vllm")
@pytest.mark.extra("transformers")
def test_report_model_gemma3_on_vllm_gives_the_predicted_verdicts(tmp_path: Path) -> None:
    """Gemma 3 (0.5 / 0.5) on vLLM 0.34.0, device-normalized by default (§18.7 as corrected): C15 fails (333 / 768
    in FP32, 3 after BF16 at level 127); C4 is n/a (one path registered: its comparison is C15's BF16 cell); C13
    and C14 are n/a (normalization only)."""
    from deferlab.impl.vllm.sources import VLLMFetchError, load
    from deferlab.reports.cli import main

    try:
        load("0.34.0")
    except VLLMFetchError as e:
        pytest.skip(f"vLLM 0.34.0 is not cached and cannot be fetched: {e}")
    out = tmp_path / "r"
    argv = ["report", "--vllm", "0.34.0", "--model", "gemma3", "--out", str(out), "--baseline", "none"]
    assert main([*argv, "--skip", "served", "sweeps", "ipc", "sim", "plots"]) == 0
    rows = json.loads((out / "report.json").read_text())["claims"]
    got = {(r["id"], r["policy"]): r["verdict"] for r in rows if r["policy"].startswith("gemma3:")}
    assert got[("C15", "gemma3:VLLM")] == "fails" and got[("C4", "gemma3:VLLM")] == "n/a"
    assert got[("C13", "gemma3:VLLM")] == "n/a" and got[("C14", "gemma3:VLLM")] == "n/a"
    assert not [r for r in rows if r["policy"] == "VLLM"]  # Kimi-K3 was not asked
    evidence = next(r["evidence"] for r in rows if (r["id"], r["policy"]) == ("C15", "gemma3:VLLM"))
    assert "333 FP32 / 3 BF16 of 768 values differ" in evidence  # §18.7's counts, measured before the code ran
