"""Names and URL values shown as literal text, never as markdown: the escaping helpers (computed by
hand) and every page that renders a stored name or a query value (AppTest). The same names are
checked in a real browser, with every request recorded, in ``tests/e2e/test_escaping_e2e.py``."""

from __future__ import annotations

from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from app.escape import WORD_JOINER, md_code, md_message, md_text, one_line, plotly_text
from db.store import Store
from db.study_store import StudyStore
from jobs.study_space import generate, parse_space
from tests.app.conftest import add_run, two_agent_config

WJ = WORD_JOINER
IMAGE = "![x](http://evil.test/p.png)"
PHISH = "[Session expired: sign in again](http://evil.test)"
TAG_LINK = '<a href="http://evil.test/t">Session expired</a>'
TICK_PATH = "/data/ck`pt ![c](http://evil.test/c.png)`/step-2"


# ---- the helpers, by hand


def test_one_line_turns_line_breaks_and_control_characters_into_spaces() -> None:
    assert one_line("a\nb\r\nc\td\x00e\u2028f\x85g") == "a b  c d e f g"
    assert one_line(12) == "12"


def test_md_text_escapes_every_ascii_punctuation_character() -> None:
    assert md_text("plain name 42") == "plain name 42"
    assert md_text("a_b *c* [d]") == r"a\_b \*c\* \[d\]"
    assert md_text(IMAGE) == "\\!\\[x\\]\\(http\\:" + WJ + "\\/\\/evil\\.test\\/p\\.png\\)"
    assert md_text("<img src=x> `t` #1 | ~s~ $x$ &amp;") == (
        r"\<img src\=x\> \`t\` \#1 \| \~s\~ \$x\$ \&amp\;")
    assert md_text("back\\slash") == "back\\\\slash"


def test_md_text_keeps_a_name_on_one_line() -> None:
    assert md_text("ok\n# heading\n- item") == r"ok \# heading \- item"


def test_md_text_splits_literal_autolinks_and_shortcodes_with_a_word_joiner() -> None:
    assert md_text("www.evil.test") == "www" + WJ + "\\.evil\\.test"
    assert md_text("WWW.x") == "WWW" + WJ + "\\.x"
    assert md_text("me@evil.test") == "me\\@" + WJ + "evil\\.test"
    assert md_text(":smile: :material/home:") == "\\:" + WJ + "smile\\:" + WJ + " \\:" + WJ + "material\\/home\\:" + WJ


def test_md_message_escapes_links_images_html_and_maths_and_keeps_the_rest() -> None:
    assert md_message("must be >= 2 for magrpo (got -1)") == "must be >= 2 for magrpo (got -1)"
    assert md_message("system.schedule.every: unknown trainers ['ghost']") == (
        "system.schedule.every: unknown trainers ['ghost']")
    assert md_message(f"agents.0.model: no model at {IMAGE}") == (
        "agents.0.model: no model at ![x\\](http:" + WJ + "//evil.test/p.png)")
    assert md_message(PHISH) == "\\[Session expired: sign in again\\](http:" + WJ + "//evil.test)"
    assert md_message("see www.evil.test, me@evil.test, <http://e.test>, <b>; $x$ a\\](b `code` <= 5") == (
        "see www" + WJ + ".evil.test, me@" + WJ + "evil.test, \\<http:" + WJ + "//e.test>, \\<b>; \\$x\\$ "
        "a\\\\\\](b `code` <= 5")


def test_md_message_keeps_lines_as_hard_breaks_that_start_no_block() -> None:
    assert md_message("first\n# not a heading\r\n1. not a list\n0.5 is fine\n- no item\n--flag\n```\n> no quote\n"
                      "[ref]: http://evil.test") == (
        "first  \n\\# not a heading  \n1\\. not a list  \n0.5 is fine  \n\\- no item  \n\\--flag  \n"
        "\\```  \n\\> no quote  \n\\[ref]: http:" + WJ + "//evil.test")


def test_md_code_fences_past_every_backtick_run() -> None:
    assert md_code("/data/ckpt") == "`/data/ckpt`"
    assert md_code("a`b") == "``a`b``"
    assert md_code("x``y`z") == "```x``y`z```"
    assert md_code("`edge`") == "`` `edge` ``"
    assert md_code(" padded ") == "`  padded  `"
    assert md_code("") == "`  `"
    assert md_code(TICK_PATH) == "``/data/ck`pt ![c](http://evil.test/c.png)`/step-2``"


def test_md_code_is_one_line_and_keeps_material_shortcodes_literal() -> None:
    assert md_code("a\nb") == "`a b`"
    assert md_code(":material/home:") == "`:" + WJ + "material/home:`"


def test_plotly_text_shows_tags_as_text() -> None:
    assert plotly_text(TAG_LINK) == '&lt;a href="http://evil.test/t"&gt;Session expired&lt;/a&gt;'
    assert plotly_text("a & b") == "a &amp; b"
    assert plotly_text("writer") == "writer"


# ---- the pages


def markdown_bodies(at: AppTest) -> list[str]:
    """Every text on the page that Streamlit renders as markdown."""
    bodies = [e.value for kind in ("markdown", "caption", "info", "warning", "error", "success", "toast")
              for e in at.get(kind)]
    bodies += [e.label for e in at.get("expander")] + [e.label for e in at.get("metric")]
    bodies += [e.proto.label for e in at.get("page_link")]
    return bodies


def assert_literal(at: AppTest, *names: str) -> None:
    """Each name is shown (escaped as text or as a code span), and no markdown body holds it unescaped."""
    assert not at.exception, at.exception
    bodies = markdown_bodies(at)
    for name in names:
        shown = [b for b in bodies if md_text(name) in b or md_code(name) in b]
        assert shown, f"{name!r} is not shown escaped in any of {bodies}"
    for body in bodies:  # what is left outside the names' code spans holds no link target in plain text
        rest = body
        for name in names:
            rest = rest.replace(md_code(name), "")
        assert "evil.test" not in rest, f"a name unescaped in {body!r}"


def trace_texts(figures: list[dict[str, Any]]) -> list[str]:
    texts = []
    for figure in figures:
        texts += [str(t.get("name", "")) for t in figure["data"]]
        texts.append(str(figure["layout"].get("title", {}).get("text", "")))
        texts += [str(a.get("text", "")) for a in figure["layout"].get("annotations", [])]
    return texts


def test_agent_names_in_transcripts_are_literal(app, store: Store, experiment: int) -> None:
    run_id = add_run(store, experiment, steps=1, agents=(IMAGE, PHISH), episodes_per_step=1)
    at = app("transcripts", run=run_id)
    assert_literal(at, IMAGE, PHISH)
    assert f"view as {md_text(IMAGE)}: the prompt it saw" in [e.label for e in at.expander]


def test_experiment_worker_and_queue_names_on_workers_are_literal(app, store: Store) -> None:
    experiment = store.create_experiment(PHISH, config=two_agent_config()).id
    run = store.create_run(experiment, two_agent_config(), IMAGE, device="cpu")
    store.upsert_worker(TICK_PATH, host="h", devices=["cpu"], queues=[IMAGE])
    at = app("workers")
    assert_literal(at, PHISH, IMAGE, TICK_PATH)
    assert any(f"#{run.id} {md_text(PHISH)}" in b for b in markdown_bodies(at))


def test_experiment_names_on_compare_are_literal(app, store: Store, figures) -> None:
    experiment = store.create_experiment(IMAGE, config=two_agent_config()).id
    first = add_run(store, experiment, steps=2, config=two_agent_config(seed=1))
    second = add_run(store, experiment, steps=2, config=two_agent_config(seed=2))
    at = app("compare", runs=f"{first},{second}")
    assert_literal(at, IMAGE)
    at.toggle(key="cmp_by_seed").set_value(False).run()
    assert_literal(at, IMAGE)


def test_html_in_names_is_text_in_chart_legends(app, store: Store, figures) -> None:
    experiment = store.create_experiment(TAG_LINK, config=two_agent_config()).id
    run_id = add_run(store, experiment, steps=2, agents=(TAG_LINK, "editor"))
    other = add_run(store, experiment, steps=2, agents=(TAG_LINK, "editor"))
    detail = app("run_detail", run=run_id)
    [picker] = [m for m in detail.multiselect if m.label == "charts"]
    picker.set_value(["loss per agent"]).run()
    for at in (detail, app("compare", runs=f"{run_id},{other}")):
        assert not at.exception
        texts = trace_texts(figures(at))
        assert any(plotly_text(TAG_LINK) in t for t in texts), texts
        assert not [t for t in texts if "<a" in t]


def test_study_names_on_studies_are_literal(app, store: Store, experiment: int) -> None:
    base = two_agent_config()
    space = {"trainer.agent_learning_rate": [0.001]}
    study = StudyStore(store).create_study(PHISH, {"base": base, "space": space},
                                           generate(base, parse_space(space), seeds=1), max_concurrent=1)
    at = app("studies", study=study.id)
    assert_literal(at, PHISH)


def test_checkpoint_paths_with_a_backtick_on_run_detail_are_literal(app, store: Store, experiment: int) -> None:
    run_id = add_run(store, experiment, status="succeeded", steps=2)
    store.add_checkpoint(run_id, 2, TICK_PATH)
    at = app("run_detail", run=run_id, tab="Checkpoints & downloads")
    assert_literal(at, TICK_PATH)
    assert any(md_code(TICK_PATH) in b for b in markdown_bodies(at))


@pytest.mark.parametrize("raw", [IMAGE, PHISH])
def test_query_values_in_not_found_boxes_are_literal(app, store: Store, experiment: int, raw: str) -> None:
    at = app(experiment=raw)
    assert [e.value for e in at.error] == [f"experiment {md_text(raw)} not found"]
    assert_literal(at, raw)
    at = app("run_detail", run=raw)
    assert [e.value for e in at.error] == [f"run {md_text(raw)} not found"]
    assert_literal(at, raw)
