"""The report's figures (matplotlib, Agg, PNG): claims and sweeps (`figures`), the simulator (`sim`)."""
