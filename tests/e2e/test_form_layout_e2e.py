"""The experiment form's sticky action bar never covers a field: a field the browser scrolls to (Tab,
focus) lands below the bar, on a small window the bar does not stick at all, and unsaved changes add
one line to it, not a paragraph. Screenshots go to
the folder printed at the start (``layout-*.png``)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.e2e.conftest import create_quickstart
from tests.e2e.test_dashboard_e2e import _settle

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.slow]

# Is the element's centre the element itself (or inside it), or something drawn over it?
UNCOVERED_JS = """(el) => {
  const box = el.getBoundingClientRect();
  const top = document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2);
  return !!top && (el === top || el.contains(top) || top.contains(el));
}"""


def test_the_action_bar_never_covers_a_field(shared_up, browser_page, artifacts: Path) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=30_000)
    (url, home), page = shared_up, browser_page
    experiment = create_quickstart(home, f"layout {uuid.uuid4().hex[:8]}")  # the quick start's form
    page.goto(f"{url}/?experiment={experiment}")
    expect(page.get_by_role("heading", name=f"Edit experiment #{experiment}")).to_be_visible()
    _settle(page)
    bar = page.locator(".st-key-exp_action_bar")
    for width, height in ((1400, 1000), (1000, 650), (560, 800)):
        page.set_viewport_size({"width": width, "height": height})
        _settle(page)
        page.mouse.move(width - 100, height - 100)  # over the form, not the sidebar
        page.mouse.wheel(0, 6000)  # to the end of the form, then back to a field above
        page.wait_for_timeout(500)
        for name in ("max_steps", "experiment name"):
            field = page.get_by_role("spinbutton" if name == "max_steps" else "textbox", name=name, exact=True)
            field.focus()  # the browser scrolls it into view, as Tab and Shift-Tab do
            page.wait_for_timeout(300)
            covered = not field.evaluate(UNCOVERED_JS)
            page.screenshot(path=str(artifacts / f"layout-{width}x{height}-{name.replace(' ', '-')}.png"))
            assert not covered, f"at {width}x{height} the action bar covers the field {name!r}"
        page.mouse.wheel(0, 6000)
        page.wait_for_timeout(500)
        box = bar.bounding_box()  # at the end of the form: a sticky bar stays small, a tall one scrolls away
        assert box is not None and (box["height"] < height / 3 or box["y"] + box["height"] <= 0), \
            f"at {width}x{height} the bar covers {box['height']:.0f} of {height} px"

    # with unsaved changes the bar stays one row of buttons and one line of note (147 px at 1400 px wide and
    # 171 px at 1000 before: the note wrapped over three lines); hovering the note shows it whole
    page.set_viewport_size({"width": 1400, "height": 1000})
    for name, role, value in (("max_steps", "spinbutton", "77"), ("experiment name", "textbox", "layout renamed")):
        field = page.get_by_role(role, name=name, exact=True)
        field.fill(value)
        field.press("Enter")
        _settle(page)
    note = bar.get_by_text("Unsaved changes")
    expect(note).to_be_visible()
    for width, height in ((1400, 1000), (1000, 650)):
        page.set_viewport_size({"width": width, "height": height})
        _settle(page)
        page.mouse.move(width - 100, height - 100)
        page.wait_for_timeout(300)
        tall = bar.bounding_box()["height"]
        page.screenshot(path=str(artifacts / f"layout-{width}x{height}-unsaved.png"))
        assert tall <= 110, f"at {width}x{height} the bar with unsaved changes is {tall:.0f} px high"
    note.hover()
    page.wait_for_timeout(300)
    assert bar.bounding_box()["height"] > tall, "hovering the note shows it whole"
