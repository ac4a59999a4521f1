"""The shapes of the comparator APIs (CoMLRL 1.4.3's ``comparator_api_format`` values): their names, and
the completion texts in each one's parsed JSON answer. Pure functions, stdlib only.

- ``generic``: the dotted ``comparator_api_response_field``, else the first non-empty of
  ``completions``/``responses``/``outputs``/``choices``; each item a string or a dict with
  text/content/completion/response/message.content;
- ``openai_chat``: each choice's ``message.content`` (else its ``text``);
- ``anthropic_messages``: each ``type: text`` content block;
- ``openai_responses``: each output item's ``output_text``/``text`` blocks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

API_FORMATS = ("generic", "openai_chat", "anthropic_messages", "openai_responses")

_FORMAT_ALIASES = {
    "generic": "generic",
    "openai": "openai_chat", "openai_chat": "openai_chat", "chat": "openai_chat", "deepseek": "openai_chat",
    "anthropic": "anthropic_messages", "anthropic_messages": "anthropic_messages", "messages": "anthropic_messages",
    "openai_responses": "openai_responses", "responses": "openai_responses", "codex": "openai_responses",
}
_GENERIC_FALLBACK_FIELDS = ("completions", "responses", "outputs", "choices")
_ITEM_TEXT_FIELDS = ("text", "content", "completion", "response")


def normalize_api_format(value: str | None) -> str:
    """CoMLRL's ``comparator_api_format`` spellings -> one of ``API_FORMATS`` (None/'' -> 'generic').

    'openai'/'chat' -> openai_chat; 'anthropic'/'messages' -> anthropic_messages; 'responses'/'codex' ->
    openai_responses; 'deepseek' -> openai_chat (DeepSeek speaks the OpenAI chat format, one completion per
    request: ``ApiSettings`` then defaults ``max_n_per_request`` to 1). Case and '-' vs '_' do not matter.
    """
    key = str(value or "generic").strip().lower().replace("-", "_") or "generic"
    if key not in _FORMAT_ALIASES:
        raise ValueError(f"comparator_api_format: must be one of {', '.join(API_FORMATS)} "
                         f"(or openai, chat, deepseek, anthropic, messages, responses, codex), got {value!r}")
    return _FORMAT_ALIASES[key]


def get_dotted(data: Any, path: str | None) -> Any:
    """``data['a']['b']`` for path 'a.b'; None when the path is empty or missing."""
    if not path:
        return None
    current = data
    for part in str(path).split("."):
        if not isinstance(current, Mapping) or part not in current:
            return None
        current = current[part]
    return current


def _item_text(item: Any) -> str | None:
    """One generic response item's text: a string, a dict's text/content/completion/response/message.content."""
    if item is None:
        return None
    if isinstance(item, str):
        return item
    if not isinstance(item, Mapping):
        return str(item)
    text = next((item[key] for key in _ITEM_TEXT_FIELDS if item.get(key)), None)
    if text is None and isinstance(item.get("message"), Mapping):
        text = item["message"].get("content")
    return None if text is None else str(text)


def normalize_completion_items(value: Any) -> list[str]:
    """A generic response's completions: a string, a list of strings or dicts, or one dict."""
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    return [text for text in map(_item_text, items) if text is not None]


def _chat_texts(data: Any) -> list[str]:
    """OpenAI chat completions: each choice's message.content, else its text."""
    choices = data.get("choices") if isinstance(data, Mapping) else None
    texts: list[str] = []
    for choice in choices if isinstance(choices, list) else []:
        if not isinstance(choice, Mapping):
            continue
        message = choice.get("message")
        if isinstance(message, Mapping) and message.get("content") is not None:
            texts.append(str(message["content"]))
        elif choice.get("text") is not None:
            texts.append(str(choice["text"]))
    return texts


def _anthropic_texts(data: Any) -> list[str]:
    """Anthropic Messages: the text of each ``type: text`` content block."""
    content = data.get("content") if isinstance(data, Mapping) else None
    return [str(block["text"]) for block in (content if isinstance(content, list) else [])
            if isinstance(block, Mapping) and block.get("type") == "text" and block.get("text") is not None]


def _responses_texts(data: Any) -> list[str]:
    """OpenAI Responses: the text of each output item's ``output_text``/``text`` content blocks."""
    output = data.get("output") if isinstance(data, Mapping) else None
    texts: list[str] = []
    for entry in output if isinstance(output, list) else []:
        content = entry.get("content") if isinstance(entry, Mapping) else None
        for block in content if isinstance(content, list) else []:
            if (isinstance(block, Mapping) and block.get("type") in ("output_text", "text")
                    and block.get("text") is not None):
                texts.append(str(block["text"]))
    return texts


def extract_completions(data: Any, api_format: str, response_field: str = "completions") -> list[str]:
    """The completion texts in a parsed response of ``api_format`` (generic: ``response_field``, else the
    first non-empty of completions/responses/outputs/choices)."""
    fmt = normalize_api_format(api_format)
    if fmt == "openai_chat":
        return _chat_texts(data)
    if fmt == "anthropic_messages":
        return _anthropic_texts(data)
    if fmt == "openai_responses":
        return _responses_texts(data)
    value = get_dotted(data, response_field)
    if value is None and isinstance(data, Mapping):
        value = next((data[key] for key in _GENERIC_FALLBACK_FIELDS if data.get(key)), None)
    return normalize_completion_items(value)
