"""``reports.core.grouping``: failure signatures, one entry per distinct failure, and never a cut without the full text."""

from __future__ import annotations

from deferlab.reports.core import grouping

# Evidence texts as the claim tests record them on real SGLang (claimcheck.verify_claim's "<evidence> <failure>
# also <more>" shape), from a `deferlab versions 0.5.18 0.5.21 0.5.23` run.
C3_EVIDENCE = (
    "0.5/0.5: FP32 differs from the eager formula at 205/256 levels (checkpoint form: 205/256); after BF16 over "
    "drawn mean/std: differs for ((0.0, 0.0, 1.0), (1.0, 1.0, 1.0)): AssertionError: 1 of 256 levels differ after "
    "BF16. AssertionError: 205 of 256 levels differ in FP32 (mean (0.5, 0.5, 0.5), std (0.5, 0.5, 0.5))"
)
C11_EVIDENCE = (
    "IndexError: tuple index out of range also ArrayImage(torch (9, 2, 3) torch.uint8, layout=HWC, w=2, h=9, c=3): "
    "AssertionError: materialized (4, 3, 2, 2), the true 2x9 image needs 12 patches; also PIL.Image(mode='La'): "
    "AssertionError: unclear error from the producer: ValueError: conversion from La to L not supported"
)
C6_EVIDENCE = "control without the skip: every rank copied every item; ValueError: Kimi-K3 deferred GPU preprocessing produced wrong grids"  # noqa: E501


def _policy(row: dict) -> str:
    return row["policy"]


def test_the_failure_is_the_found_one_not_the_claims_text_nor_the_also_ones() -> None:
    """The recorded failure opens a sentence; a quoted cause after a colon and the "also" failures are not it."""
    assert grouping.failure_text(C3_EVIDENCE) == (
        "AssertionError: 205 of 256 levels differ in FP32 (mean (0.5, 0.5, 0.5), std (0.5, 0.5, 0.5))"
    )
    assert grouping.failure_text(C11_EVIDENCE) == "IndexError: tuple index out of range"
    assert grouping.failure_text(C6_EVIDENCE) == "ValueError: Kimi-K3 deferred GPU preprocessing produced wrong grids"
    nested = "AssertionError: unclear error from the producer: ValueError: conversion from La to L not supported"
    assert grouping.failure_text(nested) == nested  # the cause stays part of the message
    assert grouping.failure_text("fails for 2 of 6 cells also x") == "fails for 2 of 6 cells"  # no exception named


def test_signature_normalizes_numbers_sizes_and_addresses_but_not_names() -> None:
    """Numbers, sizes and 0x addresses are normalized; digits inside names (float32, C3, kimi_k3) are kept."""
    a = "AssertionError: materialized (4, 3, 2, 2), the true 2x9 image needs 12 patches at 0x7f00aa in float32"
    b = "AssertionError: materialized (8, 3, 1, 1), the true 16x4 image needs 3 patches at 0x5512 in float32"
    assert grouping.normalize(a) == grouping.normalize(b)
    assert grouping.normalize(a) == (
        "AssertionError: materialized (#, #, #, #), the true # image needs # patches at 0x… in float32"
    )
    assert grouping.normalize("C3 of kimi_k3 under bf16: -1.5e-3") == "C3 of kimi_k3 under bf16: #"
    # the system's own name in a message (C14, C15 name the served path) is no new failure
    assert grouping.normalize("sglang-0.5.21 (eager): 3 of 3") == grouping.normalize("sglang-0.5.22 (eager): 2 of 3")
    assert grouping.normalize("on sglang-0.5.21+g1a2b3c4d5e") == "on sglang-#+g<commit>"
    assert grouping.failure_signature("IndexError: x") != grouping.failure_signature("ValueError: x")


def test_one_entry_per_claim_and_signature_listing_everything_it_applies_to() -> None:
    """Seven policies with one C3 flaw and two with another give two entries, each naming its policies."""
    rows = [
        {"id": "C3", "policy": p, "verdict": "fails", "evidence": C3_EVIDENCE, "counterexample": "[0.5]"}
        for p in "ABCDEFG"
    ]
    rows[3] = {**rows[3], "evidence": C3_EVIDENCE.replace("205 of 256", "17 of 256"), "counterexample": "[0.25]"}
    rows += [{"id": "C3", "policy": "H", "verdict": "holds", "evidence": "fine"}]
    rows += [{"id": "C11", "policy": p, "verdict": "fails", "evidence": C11_EVIDENCE} for p in "AB"]
    groups = grouping.group_failures(grouping.failure_entries(rows, lambda r: r["policy"]))
    assert [(g["claim"], g["where"]) for g in groups] == [("C3", list("ABCDEFG")), ("C11", ["A", "B"])]
    assert len(groups[0]["members"]) == 7 and groups[0]["evidence"] == C3_EVIDENCE  # full text kept
    other = grouping.group_failures(grouping.failure_entries([rows[0], {**rows[0], "evidence": C11_EVIDENCE}], _policy))
    assert len(other) == 2  # same claim, a different failure: two entries


def test_markdown_cuts_only_beside_the_full_text_in_a_details_block() -> None:
    """A long failure is shortened on the bullet line, and the whole evidence and counterexample follow it."""
    long = "AssertionError: " + "x" * 500
    ce = "`" * 4 + "C" * 300  # backticks inside cannot close the fence
    rows = [{"id": "C12", "policy": p, "verdict": "fails", "evidence": long, "counterexample": ce} for p in ("P", "Q")]
    md = "\n".join(grouping.markdown_groups(grouping.group_failures(grouping.failure_entries(rows, _policy))))
    bullet = md.splitlines()[0]
    assert bullet.startswith("- **C12** on `P`, `Q`: `AssertionError: xxx") and "…" in bullet and len(bullet) < 250
    assert md.count(long) == 1 and md.count(ce) == 1 and "<details><summary>full text</summary>" in md
    fence = "`" * 5
    assert f"  {fence}\n  {ce}\n  {fence}" in md and md.rstrip().endswith("</details>")


def test_distinct_texts_of_one_group_are_each_shown_with_where_they_came_from() -> None:
    """Members with the same signature but different counterexamples each keep their text, labelled."""
    rows = [
        {"id": "C10", "policy": "P", "verdict": "fails", "evidence": "AssertionError: n 1", "counterexample": "a"},
        {"id": "C10", "policy": "Q", "verdict": "fails", "evidence": "AssertionError: n 2", "counterexample": "b"},
        {"id": "C10", "policy": "R", "verdict": "fails", "evidence": "AssertionError: n 2", "counterexample": "b"},
    ]
    md = "\n".join(
        grouping.markdown_groups(grouping.group_failures(grouping.failure_entries(rows, lambda r: r["policy"])))
    )
    assert "evidence (P):" in md and "evidence (Q, R):" in md and "counterexample (Q, R):" in md
