"""Formatters: CoMLRL conventions, chat templates, prompt templates and peer replies."""

from __future__ import annotations

import pytest

from engine.models.tiny import build_tiny_model
from engine.trainer.rollout import (
    call_formatter,
    default_formatter,
    normalize_formatters,
    render_prompt,
    template_formatter,
    with_peer_replies,
)


@pytest.fixture(scope="module")
def tokenizer():
    return build_tiny_model("llama", "xs", seed=0)[1]


def test_default_formatter_reads_prompt_and_names_missing_field() -> None:
    assert default_formatter({"prompt": "hi"}) == "hi"
    with pytest.raises(KeyError, match="no 'prompt' field"):
        default_formatter({"question": "hi"})


def test_normalize_formatters() -> None:
    def fmt(item):
        return item["x"]

    assert normalize_formatters(None, 2) == [default_formatter, default_formatter]
    assert normalize_formatters(fmt, 3) == [fmt, fmt, fmt]
    with pytest.raises(ValueError, match="got 1 for 2 agents"):
        normalize_formatters([fmt], 2)


def test_later_turns_use_external_prompts_or_rewrite_the_item() -> None:
    def plain(item):
        return "Q: " + item["prompt"]

    def aware(item, external_prompts=None):
        return f"{item['prompt']} | {external_prompts}"

    item = {"prompt": "orig"}
    assert call_formatter(plain, item, external_prompt="next") == "Q: next"
    assert call_formatter(aware, item, external_prompt="next") == "orig | next"
    assert item == {"prompt": "orig"}


def test_messages_go_through_the_chat_template(tokenizer) -> None:
    text = render_prompt([{"role": "user", "content": "hello"}], tokenizer, system_prompt="Be brief.")
    assert text.startswith("<|im_start|>system\nBe brief.<|im_end|>")
    assert "<|im_start|>user\nhello<|im_end|>" in text
    assert text.endswith("<|im_start|>assistant\n")


def test_strings_stay_plain_unless_a_system_prompt_is_set(tokenizer) -> None:
    assert render_prompt("hello", tokenizer) == "hello"
    assert "<|im_start|>system\nSys<|im_end|>" in render_prompt("hello", tokenizer, system_prompt="Sys")


def test_messages_without_a_chat_template_are_an_error(tokenizer) -> None:
    tokenizer = build_tiny_model("llama", "xs", seed=0)[1]
    tokenizer.chat_template = None
    with pytest.raises(ValueError, match="no chat_template"):
        render_prompt([{"role": "user", "content": "x"}], tokenizer)
    assert render_prompt("x", tokenizer, system_prompt="S") == "S\n\nx"


def test_template_formatter() -> None:
    fmt = template_formatter("Helper for: {prompt} ({lang})")
    assert fmt({"prompt": "sum", "lang": "py"}) == "Helper for: sum (py)"
    assert fmt({"prompt": "sum", "lang": "py"}, external_prompts="fix it") == "Helper for: fix it (py)"
    with pytest.raises(KeyError, match="uses {lang}"):
        fmt({"prompt": "sum"})


def test_peer_replies_are_added_to_text_and_to_the_last_user_message() -> None:
    assert with_peer_replies("Q", []) == "Q"
    text = with_peer_replies("Q", [("planner", "do A")])
    assert text.startswith("Q\n\n") and "[planner]\ndo A" in text
    messages = with_peer_replies([{"role": "user", "content": "Q"}], [("planner", "do A")])
    assert messages[-1]["role"] == "user" and "[planner]\ndo A" in messages[-1]["content"]
