"""Generator of peek2's Unicode category tables (see generate.py)."""
