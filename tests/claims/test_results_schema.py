"""Schema 3 of ``verdicts.json``: typed column and counterexample beside the old keys; 1 and 2 still read.

Why: a results file written by an older deferlab (a baseline, a colleague's run) must still read, a new one must
carry the structure a reproducer rebuilds the input from, and a file of a schema this deferlab does not know is
refused in one line naming it.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from deferlab.properties import verdicts
from deferlab.reference.system.claims import SCHEMA_VERSION, Claim, load_results, merge
from deferlab.reference.system.rows import Row, Verdict

CLAIMS = {"C1": Claim("C1", "one", "src", "prop", {"PR_33921": "holds", "RELEASED": "holds"})}
OLD_ROW = {
    "id": "C1",
    "statement": "one",
    "source": "src",
    "policy": "qwen3-vl:VLLM host-normalized",
    "verdict": "fails",
    "evidence": "AssertionError: 3 != 4",
    "counterexample": ["JPEG EXIF 2", 17, 11, 0],
    "provenance": {},
}


def _write(folder: Path, doc: dict[str, Any]) -> Path:
    (folder / "verdicts.json").write_text(json.dumps(doc))
    return folder


@pytest.mark.parametrize("version", [1, 2])
def test_old_schemas_still_read_and_their_rows_are_unchanged(tmp_path: Path, version: int) -> None:
    """A schema-1 or -2 file reads, and each row typed and written back is the row read."""
    doc = {"schema_version": version, "profile": "ci", "impl": "x", "claims": [OLD_ROW], "properties": []}
    read = load_results(_write(tmp_path, doc))
    row = Row.from_dict(read["claims"][0])
    assert row.to_dict() == OLD_ROW and row.column.engine == "vllm" and row.column.path == "host-normalized"
    assert row.counterexample is not None and row.counterexample.kind == "text"


def test_a_schema_3_file_round_trips(tmp_path: Path) -> None:
    """What the recorder writes merges into schema 3, reads back, and types into the same rows."""
    rec = verdicts.Recorder()
    rec.record_claim("C1", "PR_33921", "fails", "AssertionError: x", ("JPEG EXIF 2", 17, 11, 0))
    part = json.loads(json.dumps({"claims": rec.claims, "properties": []}))
    doc = merge([part], profile="ci", impl="x", claims=CLAIMS, now=lambda: datetime(2026, 1, 1, tzinfo=UTC))
    assert doc["schema_version"] == SCHEMA_VERSION == 3
    read = load_results(_write(tmp_path, doc))
    rows = {r["policy"]: r for r in read["claims"]}
    assert rows["PR_33921"]["counterexample"] == ["JPEG EXIF 2", 17, 11, 0]  # the old key, as before
    assert rows["PR_33921"]["counterexample_input"] == {
        "kind": "arguments",
        "arguments": {"args": ["JPEG EXIF 2", 17, 11, 0]},
    }
    assert rows["PR_33921"]["column"]["label"] == "PR_33921" and rows["RELEASED"]["counterexample_input"] is None
    for raw in read["claims"]:
        assert Row.from_dict(raw).to_dict() == raw
    typed = Row.from_dict(rows["PR_33921"])
    assert typed.verdict is Verdict.FAILS and typed.counterexample is not None
    assert typed.counterexample.arguments == {"args": ["JPEG EXIF 2", 17, 11, 0]}


@pytest.mark.parametrize("version", [0, 4, 99, None])
def test_an_unknown_schema_is_refused_in_one_line(tmp_path: Path, version: Any) -> None:
    _write(tmp_path, {"schema_version": version, "claims": []})
    with pytest.raises(ValueError, match=rf"has schema_version {version!r}; this deferlab reads 1, 2, 3$"):
        load_results(tmp_path)


def test_the_recorder_structures_what_it_can_and_describes_the_rest() -> None:
    """Drawn parameters are arguments; a small image or array carries every byte; anything else is text."""
    assert verdicts.structure(None) is None
    assert verdicts.structure({"w": 3, "h": [1, 2]}) == {"kind": "arguments", "arguments": {"w": 3, "h": [1, 2]}}
    assert verdicts.structure(7) == {"kind": "arguments", "arguments": {"value": 7}}
    image = Image.new("RGBA", (3, 2), (1, 2, 3, 4))
    found = verdicts.structure(image)
    assert found is not None and found["kind"] == "image"
    rebuilt = Image.frombytes(found["arguments"]["mode"], tuple(found["arguments"]["size"]),
                              bytes.fromhex(found["arguments"]["data"]))  # fmt: skip
    assert rebuilt.tobytes() == image.tobytes()
    assert verdicts.structure(np.arange(4, dtype=np.uint8))["arguments"]["values"] == [0, 1, 2, 3]  # type: ignore[index]
    assert verdicts.structure(Image.new("L", (9, 9))) == {"kind": "text", "arguments": {}}  # too big to carry
    assert verdicts.structure([object()]) == {"kind": "text", "arguments": {}}
