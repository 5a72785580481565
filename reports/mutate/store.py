"""A campaign's one store: ``campaign.sqlite`` in its out folder (the standard library's sqlite3).

What it holds: the plan (what was asked: engine, spec, profile, seed, sample, targets, claims, the drawn
population and the reference's summary), the reference run and the anchor's, the control, one row per
mutant (its spec; once run, its outcome, seconds and record: reasons, the units run, the diff, the anchor's
side), and one row per session (wall seconds, runs forked warm and cold with why).

Why one file and a database: a campaign is interrupted (Ctrl-C, SIGTERM, a reboot) and resumed; each
finished mutant is committed as it finishes, a killed writer leaves the last committed state (sqlite's
journal), a resume runs the rows still pending (and the harness ``error`` ones), and the outputs
(mutate.json/md/png) are rendered from this file alone. All access is from the campaign's main thread.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

NAME = "campaign.sqlite"
SCHEMA = """
CREATE TABLE IF NOT EXISTS doc (name TEXT PRIMARY KEY, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS mutant (
    id TEXT PRIMARY KEY, spec TEXT NOT NULL, outcome TEXT, seconds REAL, record TEXT
);
CREATE TABLE IF NOT EXISTS session (n INTEGER PRIMARY KEY, wall REAL NOT NULL, runs TEXT NOT NULL);
"""


class Store:
    """The campaign's store at ``folder / campaign.sqlite`` (made on first use)."""

    def __init__(self, folder: Path) -> None:
        self.path = Path(folder) / NAME
        self.db = sqlite3.connect(self.path, isolation_level=None)  # autocommit: each write is one transaction
        self.db.executescript(SCHEMA)

    @staticmethod
    def holds_campaign(folder: Path) -> bool:
        """Whether ``folder`` holds a campaign's store with its plan written."""
        path = Path(folder) / NAME
        if not path.is_file():
            return False
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return db.execute("SELECT 1 FROM doc WHERE name = 'plan'").fetchone() is not None
        except sqlite3.DatabaseError:
            return False
        finally:
            db.close()

    def close(self) -> None:
        self.db.close()

    # --- documents: the plan, the reference, the anchor's reference, the control -----------------------------------
    def get(self, name: str) -> Any:
        row = self.db.execute("SELECT body FROM doc WHERE name = ?", (name,)).fetchone()
        return None if row is None else json.loads(row[0])

    def put(self, name: str, body: Any) -> None:
        self.db.execute("INSERT OR REPLACE INTO doc VALUES (?, ?)", (name, json.dumps(body)))

    # --- mutants ------------------------------------------------------------------------------------------------------
    def plan_mutants(self, specs: dict[str, dict[str, Any]]) -> None:
        """The campaign's mutants (id -> `engine.Mutant` fields), all pending, in one transaction."""
        with self.db:
            self.db.execute("BEGIN")
            self.db.executemany(
                "INSERT OR IGNORE INTO mutant (id, spec) VALUES (?, ?)", [(i, json.dumps(s)) for i, s in specs.items()]
            )

    def specs(self) -> dict[str, dict[str, Any]]:
        return {i: json.loads(s) for i, s in self.db.execute("SELECT id, spec FROM mutant ORDER BY id")}

    def pending(self) -> list[str]:
        """The mutants still to run: never finished, or a harness ``error`` (retried)."""
        rows = self.db.execute("SELECT id FROM mutant WHERE outcome IS NULL OR outcome = 'error' ORDER BY id")
        return [i for (i,) in rows]

    def finish(self, record: dict[str, Any]) -> None:
        """One mutant's record, committed at once."""
        self.db.execute(
            "UPDATE mutant SET outcome = ?, seconds = ?, record = ? WHERE id = ?",
            (record["outcome"], record.get("seconds", 0), json.dumps(record), record["id"]),
        )

    def records(self) -> list[dict[str, Any]]:
        """Every finished mutant's record, in id order."""
        rows = self.db.execute("SELECT record FROM mutant WHERE record IS NOT NULL ORDER BY id")
        return [json.loads(r) for (r,) in rows]

    # --- sessions -----------------------------------------------------------------------------------------------------
    def add_session(self, wall: float, runs: dict[str, Any]) -> None:
        self.db.execute("INSERT INTO session (wall, runs) VALUES (?, ?)", (round(wall, 1), json.dumps(runs)))

    def sessions(self) -> tuple[float, dict[str, Any]]:
        """The campaign's wall seconds over every session, and its runs: warm forks, cold ones by why."""
        wall, warm, cold, enabled = 0.0, 0, Counter[str](), False
        for seconds, text in self.db.execute("SELECT wall, runs FROM session ORDER BY n"):
            runs = json.loads(text)
            wall, warm, enabled = wall + seconds, warm + runs.get("warm", 0), runs.get("enabled", enabled)
            cold.update(runs.get("cold", {}))
        return round(wall, 1), {"enabled": enabled, "warm": warm, "cold": dict(cold)}
