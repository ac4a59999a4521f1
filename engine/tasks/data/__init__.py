"""Data files shipped with the built-in tasks (read with importlib.resources)."""
