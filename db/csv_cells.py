"""Cells of the CSV files the dashboard and the CLI hand out, made safe to open in a spreadsheet.

Names in them (metric keys, searched settings and their values) are user text; a spreadsheet
evaluates a cell that starts like a formula (``=HYPERLINK(...)``, ``@SUM(...)``). Torch-free and pure."""

from __future__ import annotations

from typing import Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""What a spreadsheet reads as the start of a formula (OWASP's list for CSV injection)."""


def spreadsheet_cell(value: Any) -> Any:
    """``value`` for a CSV cell a spreadsheet will open: a number (or None) as it is, any other value as
    text, with a leading ``'`` when it starts like a formula (``=HYPERLINK(...)``, ``@SUM(...)``,
    ``-2+3``), so the spreadsheet shows the characters instead of evaluating them."""
    if value is None or isinstance(value, bool | int | float):
        return value
    text = str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text
