"""A live run's metric charts that append: a Streamlit component (``live_chart_frontend/``, static HTML
and JS, no build step) that keeps the Plotly figures of all the page's live charts in one frame and, on
each poll, is sent only the points that arrived since the last one, drawn with ``Plotly.extendTraces``.
One frame for all of them: each frame runs the whole ``plotly.min.js`` when it is mounted (most of the
browser's work when the charts of a run appear), so a page mounts one, before its first chart.

``st.plotly_chart`` cannot do that: a fragment's rerun replaces its elements, and the browser redraws
each chart whose figure changed from all its points (most of a live page's browser CPU per poll). Here
the server keeps, per chart and session, the figure it sent last; a new figure that only extends it
(the same traces, styles and layout, each trace's points the old ones plus more) goes out as the new
points only. Anything else (a new setting, a trace that changed style, downsampling that moved) goes
out whole and is redrawn with ``Plotly.react``. A frame that cannot apply what it got (one mounted
after the server sent it the figure: a tab switched back) asks for the whole figure through the
component's value, once (then every chart of the frame goes out whole).

The frame loads ``plotly.min.js`` from the installed ``plotly`` package: the component's files are
copied, with it, into a folder of the data directory named after their contents (Streamlit serves a
component's folder and refuses links out of it), so the dashboard needs no network and no npm.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import plotly
import plotly.io.json as pio_json
import streamlit as st
import streamlit.components.v1 as components

from app.components.charts import _default_template

FRONTEND = Path(__file__).with_name("live_chart_frontend")
FILES = ("index.html", "live_chart.js")
LAYOUT = 2
"""How :func:`component_dir` writes the folder (part of its name: a new way gets a new folder)."""
COMPONENT = "live_chart"
"""Its name; Streamlit serves it under ``/component/app.components.live_chart.live_chart/``."""


def _plotly_js() -> Path:
    return Path(str(resources.files("plotly") / "package_data" / "plotly.min.js"))


def component_dir(root: Path) -> Path:
    """The component's folder under ``root``: its files and ``plotly.min.js``, written once per contents
    (a folder named after their digest, filled beside it and renamed into place)."""
    digest = hashlib.sha256(f"{plotly.__version__} {LAYOUT}".encode())
    for name in FILES:
        digest.update((FRONTEND / name).read_bytes())
    version = digest.hexdigest()[:16]
    target = root / f"live_chart-{version}"
    if (target / "plotly.min.js").exists():
        return target
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".live_chart-", dir=root))
    for name in FILES:
        shutil.copyfile(FRONTEND / name, staging / name)
    shutil.copyfile(_plotly_js(), staging / "plotly.min.js")
    # the scripts' addresses name their contents, so the browser may keep them (the guard marks them
    # immutable): one download and compile for every chart frame of every page
    page = (staging / "index.html").read_text()
    page = page.replace('src="plotly.min.js"', f'src="plotly.min.js?v={version}"')
    page = page.replace('src="live_chart.js"', f'src="live_chart.js?v={version}"')
    (staging / "index.html").write_text(page)
    os.chmod(staging, 0o755)
    try:
        staging.rename(target)
    except OSError:  # another process put it there first
        shutil.rmtree(staging, ignore_errors=True)
    return target


_declared: dict[str, Any] = {}


def _component(root: Path):
    if "component" not in _declared:
        _declared["component"] = components.declare_component(COMPONENT, path=str(component_dir(root)))
    return _declared["component"]


@dataclass
class Sent:
    """What a session's frame of one chart was sent: the figure (whole), the message number, the
    generation of the page it was sent in, and the last request for a whole figure answered."""

    spec: dict
    seq: int
    generation: int
    asked: int = 0


def extension(old: dict, new: dict) -> dict | None:
    """The points ``new`` adds to ``old`` (``{"traces": [...], "x": [[...]], "y": [[...]]}``, traces that
    grew only), or None when ``new`` is not ``old`` plus points: another layout, another trace set or
    style, or a trace whose first points differ."""
    if old.get("layout") != new.get("layout"):
        return None
    before, after = old.get("data") or [], new.get("data") or []
    if len(before) != len(after):
        return None
    traces, xs, ys = [], [], []
    for index, (was, now) in enumerate(zip(before, after, strict=True)):
        if {k: v for k, v in was.items() if k not in ("x", "y")} != {k: v for k, v in now.items() if k not in ("x", "y")}:
            return None
        old_x, old_y, new_x, new_y = was.get("x") or [], was.get("y") or [], now.get("x") or [], now.get("y") or []
        n = len(old_x)
        if len(new_x) < n or len(old_y) != n or len(new_y) != len(new_x):
            return None
        if new_x[:n] != old_x or not _same(new_y[:n], old_y):
            return None
        if len(new_x) > n:
            traces.append(index)
            xs.append(list(new_x[n:]))
            ys.append(list(new_y[n:]))
    return {"traces": traces, "x": xs, "y": ys}


def _same(a: list, b: list) -> bool:
    """Equal lists of values, NaN equal to NaN (a NaN is never ``==`` itself)."""
    return all(x == y or (x != x and y != y) for x, y in zip(a, b, strict=True))


def message(sent: Sent | None, spec: dict, generation: int, asked: int, chart: str = "") -> tuple[dict, Sent]:
    """What to send the frame for the chart ``spec`` (one entry of the component's ``charts``), and what
    it will then hold.

    Whole (``kind: full``) the first time, after a full page run (``generation``), on the frame's request
    (``asked``: its counter, higher than the last answered) and when ``spec`` does not extend what was
    sent; else the new points (``extend``) or nothing (``same``). ``chart`` names the chart (its key)."""
    if sent is not None and sent.generation == generation and asked <= sent.asked:
        added = extension(sent.spec, spec)
        if added is not None and not added["traces"]:
            return {"chart": chart, "seq": sent.seq, "kind": "same"}, sent
        if added is not None:
            now = Sent(spec, sent.seq + 1, generation, sent.asked)
            return {"chart": chart, "seq": now.seq, "base": sent.seq, "kind": "extend",
                    "payload": pio_json.to_json_plotly(added)}, now
    seq = sent.seq + 1 if sent is not None else 1
    now = Sent(spec, seq, generation, max(asked, sent.asked if sent else 0))
    template = _default_template()
    layout = spec.get("layout") or {}
    whole = {**spec, "layout": {**layout, "template": template}} if template and "template" not in layout else spec
    return {"chart": chart, "seq": seq, "kind": "full", "payload": pio_json.to_json_plotly(whole)}, now


def live_charts(charts: list[tuple[str, dict]], *, key: str, generation: int, root: Path, state: Any = None) -> None:
    """Draw each ``(chart, spec)`` (:func:`app.components.charts.line_spec` figures, in order) in the one
    frame ``key``, sending it only what it does not hold; with no charts, the frame is mounted empty
    (its scripts loaded before the first chart comes). ``generation`` changes on each full run of the
    page (after which every figure is sent whole again) and ``root`` is where the component's files are
    written."""
    state = st.session_state if state is None else state
    asked_value = state.get(key)
    asked = int(asked_value.get("full", 0)) if isinstance(asked_value, dict) else 0
    messages = []
    for chart, spec in charts:
        held = state.get(f"live_chart.{chart}")
        sent, now = message(held if isinstance(held, Sent) else None, spec, generation, asked, chart)
        state[f"live_chart.{chart}"] = now
        messages.append(sent)
    # the frame's height until it reports its own (Streamlit's component frame reads a ``height`` argument)
    height = sum(chart_height(spec) for _, spec in charts)
    _component(root)(charts=messages, height=height, key=key, default=None)


def chart_height(spec: dict) -> int:
    """The height in pixels a chart takes in the frame (its layout's, else Plotly's 450)."""
    return int((spec.get("layout") or {}).get("height") or 450)
