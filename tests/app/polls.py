"""Live polls of an AppTest page, as a browser makes them: the timed reruns of the page's fragments
(``st.fragment(run_every=...)``) run by Streamlit's own script runner, nothing else of the page; and
the SQL statements a stretch of the dashboard's work sent to the database."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine
from streamlit.testing.v1 import AppTest, local_script_runner
from streamlit.testing.v1.element_tree import ElementTree


@dataclasses.dataclass
class Polls:
    """The fragments the last run of a page asked the browser to rerun (id → seconds), and ``poll``."""

    asked: dict[str, float] = dataclasses.field(default_factory=dict)
    polling: bool = False

    def poll(self, at: AppTest) -> ElementTree:
        """One live refresh: every fragment the page scheduled reruns, as the browser's timer asks
        (``RerunData(fragment_id_queue=..., is_auto_rerun=True)``). Returns what the poll drew (the
        fragments' elements only); ``at`` keeps the page of its last full run, as the browser does
        around a fragment, so a later ``at.run()`` sends every widget's state."""
        full = at._tree
        original = local_script_runner.RerunData
        local_script_runner.RerunData = functools.partial(original, fragment_id_queue=list(self.asked),
                                                          is_auto_rerun=True)
        self.polling = True
        try:
            at.run()
        finally:
            local_script_runner.RerunData, self.polling = original, False
        polled, at._tree = at._tree, full
        return polled


def watch_polls(monkeypatch: pytest.MonkeyPatch) -> Polls:
    """Record the timed reruns each run of a page asks for (``auto_rerun`` messages), for :class:`Polls`."""
    polls = Polls()
    parse = local_script_runner.parse_tree_from_messages

    def spy(messages):
        if not polls.polling:  # a full run schedules the page's timers anew; a poll keeps them
            polls.asked = {m.auto_rerun.fragment_id: m.auto_rerun.interval
                           for m in messages if m.HasField("auto_rerun")}
        return parse(messages)

    monkeypatch.setattr(local_script_runner, "parse_tree_from_messages", spy)
    return polls


@contextmanager
def statements() -> Iterator[list[str]]:
    """Every SQL statement any engine of this process sends while the block runs."""
    sent: list[str] = []

    def note(conn, cursor, statement, parameters, context, executemany) -> None:
        sent.append(statement)

    event.listen(Engine, "before_cursor_execute", note)
    try:
        yield sent
    finally:
        event.remove(Engine, "before_cursor_execute", note)
