"""Served vs trained in the report: the run's served paths, the skew table, --checkpoint, and their rendering."""
