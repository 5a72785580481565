"""The fake engine's core package (its init is not run either)."""
