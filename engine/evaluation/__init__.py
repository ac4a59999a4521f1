"""Held-out evaluation of a saved team, and the team analysis (base, reset and swapped agents)."""
