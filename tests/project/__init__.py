"""Tests of the project as a whole: self-containment, layering, packaging, prose that names real paths."""
