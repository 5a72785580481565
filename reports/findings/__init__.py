"""`deferlab findings`: failing verdicts grouped by root cause and ranked by what they do to the model (semantics §21)."""
