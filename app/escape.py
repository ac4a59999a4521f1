"""Untrusted text (stored names, paths, URL query values, error messages) made safe to show (pure).

Streamlit renders the body of ``st.markdown``, ``st.caption``, ``st.info``/``st.error``/...,
``st.toast`` and the labels of expanders, page links and metrics as GitHub-flavoured markdown with
Streamlit's own additions (``:red[...]`` directives, ``:material/icon:`` and ``:emoji:`` shortcodes,
``$...$`` maths). A name such as ``![x](<another host>/p.png)`` would make the browser fetch an
image from another host, and ``[Session expired: sign in again](<another host>)`` would show a
link the dashboard never meant to offer. Every value the dashboard did not write itself goes through
one of these functions before it reaches markdown:

- :func:`md_code`: the value as inline code (literal, monospaced): paths, queue and device names,
  values in a field diff. Nothing inside a code span is markdown.
- :func:`md_text`: the value as ordinary inline text: names inside a sentence, a URL value in a
  "not found" box. Every ASCII punctuation character is backslash-escaped (CommonMark allows that
  for all of them, so they show as themselves), and a word joiner (U+2060, invisible) is put after
  each ``:`` and ``@`` and between ``www`` and ``.``: GitHub's literal autolinks (``http://``,
  ``www.``, ``a@b.c``) and Streamlit's shortcodes are found in the text *after* escapes are
  resolved, so only a changed character sequence stops them.
- :func:`md_message`: a message of one or more lines (a validation problem, an exception) that
  quotes values: only what could make a link, an image, HTML or maths is escaped (a backslash, ``$``,
  the ``]`` of ``](`` and ``][``, a ``<`` before a letter, ``/``, ``!`` or ``?``; literal autolinks
  split as above) and whatever would start a block at the start of a line (``#``, ``>``, ``-``,
  ``1.``, ``[``), so the message keeps its look (``trainer.max_steps: must be >= 2``, ``unknown
  trainers ['ghost']`` read as written); lines are joined by hard line breaks.
- :func:`plotly_text`: a label in a Plotly figure (title, legend, annotation), whose text understands
  a few HTML tags (``<a href>`` among them): ``&``, ``<`` and ``>`` become entities.

Newlines (and every other control or line-separator character) become spaces in the one-line
forms, so a name can never start a new block.
"""

from __future__ import annotations

import re
import string

WORD_JOINER = "\u2060"
_PUNCTUATION = frozenset(string.punctuation)  # the ASCII punctuation CommonMark lets a backslash escape
# Line breaks and other control characters (C0, DEL, C1, the Unicode line and paragraph separators).
_BREAKS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# Where GitHub's literal autolinks and Streamlit's shortcodes start: split them with a word joiner.
_LINK_STARTS = re.compile(r"(?<=[:@])|(?<=www)(?=\.)", re.IGNORECASE)
_AUTOLINK_STARTS = re.compile(r"(?<=:)(?=//)|(?<=www)(?=\.)|(?<=@)(?=\w)", re.IGNORECASE)
# In a message: a backslash, a ``$`` (maths), the ``](`` / ``][`` of a link or image, and a ``<`` that
# opens a tag or an autolink; Python's ``['a', 'b']`` and ``x <= 5`` stay as they are.
_MESSAGE_MARKUP = re.compile(r"[\\$]|\](?=[(\[])|<(?=[A-Za-z/!?])")
_NUMBERED = re.compile(r"(\d{1,9})[.)](?=\s|$)")  # an ordered list item's marker
# A heading, quote, table row, link definition, list item, rule, setext underline or code fence at
# the start of a line.
_BLOCK_START = re.compile(r"[#>|\[]|[-+*=_](?=\s|$|[-+*=_])|```|~~~")
_SHORTCODE = re.compile(r":(?=material/)")  # Streamlit rewrites ``:material/`` even inside code spans
_BACKTICKS = re.compile(r"`+")


def one_line(value: object) -> str:
    """``str(value)`` with line breaks, tabs and other control characters turned into spaces."""
    return _BREAKS.sub(" ", str(value))


def _escaped(text: str) -> str:
    joined = _LINK_STARTS.sub(WORD_JOINER, text)
    return "".join("\\" + char if char in _PUNCTUATION else char for char in joined)


def md_text(value: object) -> str:
    """``value`` as inline markdown text that shows exactly its characters (on one line): ``a_b [c]``
    becomes ``a\\_b \\[c\\]``, ``x@y.z`` becomes ``x\\@``, a word joiner, ``y\\.z``."""
    return _escaped(one_line(value))


def _message_line(line: str) -> str:
    text = _AUTOLINK_STARTS.sub(WORD_JOINER, one_line(line).strip())
    text = _MESSAGE_MARKUP.sub(lambda found: "\\" + found[0], text)
    if numbered := _NUMBERED.match(text):  # "1. x" or "1) x" would start a list
        return f"{numbered[1]}\\{text[numbered.end(1):]}"
    if _BLOCK_START.match(text):  # "# x", "> x", "- x", "===" would start a block
        return "\\" + text
    return text


def md_message(value: object) -> str:
    """A message (any number of lines) as markdown that shows its quoted values literally: see the
    module's docstring for what is escaped; lines are joined by hard line breaks."""
    lines = str(value).replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return "  \n".join(_message_line(line) for line in lines)


def md_code(value: object) -> str:
    """``value`` as an inline code span (on one line), whatever backticks it holds.

    The fence is one backtick longer than the longest run of backticks inside, with a space on each
    side when the value starts or ends with a backtick or a space (CommonMark strips one such space).
    """
    text = _SHORTCODE.sub(":" + WORD_JOINER, one_line(value))
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    fence = "`" * (longest + 1)
    if not text or text[0] in "` " or text[-1] in "` ":
        text = f" {text} "
    return f"{fence}{text}{fence}"


def plotly_text(value: object) -> str:
    """``value`` for a Plotly title, legend entry or annotation: its HTML-like tags shown as text."""
    return str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
