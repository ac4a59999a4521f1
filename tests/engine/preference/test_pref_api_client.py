"""The comparator API client (CoMLRL's comparator_api_*) against a real HTTP server on 127.0.0.1: each
format's payload, headers and parsing, request splitting, retries and every error path."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from engine.preference.api_client import ApiClient, ComparatorApiError
from engine.preference.api_responses import API_FORMATS, extract_completions, normalize_api_format
from engine.preference.api_settings import ApiSettings
from engine.schema.preference_configs import MADPOIterConfig, MARLHFIterConfig

KEY = "sk-test-SECRET-0123456789"

Reply = tuple[int, Any]


@dataclass
class FakeApi:
    """A local server: records each request (path, lower-cased headers, JSON body) and answers from ``handler``."""

    url: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    handler: Callable[[dict[str, Any]], Reply] = lambda request: (200, {"completions": ["ok"]})

    def bodies(self) -> list[Any]:
        return [r["body"] for r in self.requests]


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        api: FakeApi = self.server.api  # type: ignore[attr-defined]
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = raw.decode("utf-8", errors="replace")
        request = {"index": len(api.requests), "path": self.path,
                   "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body}
        api.requests.append(request)
        status, reply = api.handler(request)
        data = reply if isinstance(reply, bytes) else (reply if isinstance(reply, str) else json.dumps(reply)).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # the client gave up (timeout test)
            pass

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server's signature)
        pass


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def api() -> Iterator[FakeApi]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    fake = FakeApi(url=f"http://127.0.0.1:{server.server_address[1]}/v1/generate")
    server.api = fake  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield fake
    server.shutdown()
    server.server_close()


def client_for(settings: ApiSettings) -> tuple[ApiClient, list[float]]:
    delays: list[float] = []
    return ApiClient(settings, sleep=delays.append), delays


class Scalar:
    """Not JSON-serialisable, but has ``.item()`` (as numpy/torch scalars do)."""

    def item(self) -> int:
        return 7


# --- the four formats end to end -------------------------------------------------------------------------------

def test_generic_end_to_end(api: FakeApi) -> None:
    api.handler = lambda r: (200, {"completions": ["a", {"text": "b"}, {"message": {"content": "c"}}]})
    settings = ApiSettings(url=api.url, api_key=KEY, model="m1", headers={"X-Team": "blue"}, max_new_tokens=64,
                           temperature=0.5, top_p=0.8, top_k=40)
    client, _ = client_for(settings)
    out = client.completions("Solve 2+2", 3, agent_index=1, item={"q": "2+2", "score": Scalar(), "tags": ("x",)})
    assert out == ["a", "b", "c"] and all(isinstance(t, str) for t in out)
    [request] = api.requests
    assert request["path"] == "/v1/generate"
    assert request["body"] == {"prompt": "Solve 2+2", "agent_idx": 1, "num_return_sequences": 3, "max_new_tokens": 64,
                               "temperature": 0.5, "top_p": 0.8, "top_k": 40, "model": "m1",
                               "batch_item": {"q": "2+2", "score": 7, "tags": ["x"]}}
    headers = request["headers"]
    assert headers["authorization"] == f"Bearer {KEY}"
    assert headers["content-type"] == "application/json" and headers["x-team"] == "blue"
    assert "anthropic-version" not in headers
    assert client.requests_sent == 1


def test_generic_payload_keeps_null_top_k_and_omits_an_unset_model() -> None:
    body = ApiSettings(url="http://h/x").payload("p", 2, agent_index=0, item={})
    assert body["top_k"] is None and "model" not in body and body["batch_item"] == {}


def test_openai_chat_end_to_end(api: FakeApi) -> None:
    api.handler = lambda r: (200, {"choices": [{"message": {"content": "x"}}, {"text": "y"}, {"message": None}]})
    settings = ApiSettings(url=api.url, format="openai", api_key=KEY, model="gpt-x", max_new_tokens=32,
                           temperature=0.3, top_p=0.95, top_k=50)
    client, _ = client_for(settings)
    assert client.completions("hi", 2) == ["x", "y"]
    [request] = api.requests
    assert request["body"] == {"model": "gpt-x", "messages": [{"role": "user", "content": "hi"}], "n": 2,
                               "max_tokens": 32, "temperature": 0.3, "top_p": 0.95}  # no top_k, no batch item
    assert request["headers"]["authorization"] == f"Bearer {KEY}"


def test_anthropic_messages_end_to_end(api: FakeApi) -> None:
    counter = iter(range(100))
    api.handler = lambda r: (200, {"content": [{"type": "thinking", "thinking": "hmm"},
                                               {"type": "text", "text": f"answer{next(counter)}"},
                                               {"type": "text", "text": "second block"}]})
    settings = ApiSettings(url=api.url, format="anthropic", api_key=KEY, model="claude-x", max_new_tokens=99,
                           temperature=0.2, top_p=0.5)
    client, _ = client_for(settings)
    assert client.completions("hello", 3) == ["answer0", "answer1", "answer2"]  # one per request, first text block
    assert len(api.requests) == 3 and client.requests_sent == 3
    assert api.requests[0]["body"] == {"model": "claude-x", "max_tokens": 99, "temperature": 0.2,
                                       "messages": [{"role": "user", "content": "hello"}]}  # no n, no top_p
    headers = api.requests[0]["headers"]
    assert headers["x-api-key"] == KEY and "authorization" not in headers
    assert headers["anthropic-version"] == "2023-06-01"


def test_anthropic_keeps_a_user_version_and_a_custom_key_header() -> None:
    settings = ApiSettings(url="https://a.example/v1/messages", format="messages", api_key=KEY,
                           headers={"Anthropic-Version": "2099-01-01"}, key_header="X-Custom", key_prefix="Token")
    headers = settings.headers_for_request()
    assert headers == {"Content-Type": "application/json", "Anthropic-Version": "2099-01-01",
                       "X-Custom": f"Token {KEY}"}


def test_openai_responses_end_to_end(api: FakeApi) -> None:
    api.handler = lambda r: (200, {"output": [{"type": "reasoning", "summary": []},
                                              {"type": "message", "content": [{"type": "output_text", "text": "r"}]}]})
    settings = ApiSettings(url=api.url, format="codex", api_key=KEY, model="gpt-5", max_new_tokens=77, temperature=0.9)
    client, _ = client_for(settings)
    assert client.completions("write code", 2) == ["r", "r"]
    assert [r["body"] for r in api.requests] == [{"model": "gpt-5", "input": "write code", "max_output_tokens": 77}] * 2
    assert api.requests[0]["headers"]["authorization"] == f"Bearer {KEY}"


# --- request splitting ------------------------------------------------------------------------------------------

def _chat_echo(request: dict[str, Any]) -> Reply:
    """An OpenAI chat server answering as many choices as asked, numbered across requests."""
    n = request["body"].get("n", 1)
    return 200, {"choices": [{"message": {"content": f"r{request['index']}c{i}"}} for i in range(n)]}


def test_openai_chat_splits_by_max_n_per_request(api: FakeApi) -> None:
    api.handler = _chat_echo
    client, _ = client_for(ApiSettings(url=api.url, format="chat", model="gpt-x", max_n_per_request=2))
    out = client.completions("p", 5)
    assert [b["n"] for b in api.bodies()] == [2, 2, 1]
    assert out == ["r0c0", "r0c1", "r1c0", "r1c1", "r2c0"]


def test_deepseek_asks_one_per_request(api: FakeApi) -> None:
    api.handler = _chat_echo
    client, _ = client_for(ApiSettings(url=api.url, format="openai_chat", model="deepseek-chat"))
    assert len(client.completions("p", 3)) == 3
    assert [b["n"] for b in api.bodies()] == [1, 1, 1]
    # the 'deepseek' format spelling means one per request whatever the model is called
    assert ApiSettings(url="http://proxy/v1", format="deepseek", model="any").per_request_limit(4) == 1
    assert ApiSettings(url="https://api.deepseek.com/chat/completions", format="chat").per_request_limit(4) == 1
    # a configured limit wins over the detection; otherwise everything in one request
    pinned = ApiSettings(url="http://h/x", format="chat", model="deepseek-r1", max_n_per_request=3)
    assert pinned.per_request_limit(8) == 3
    assert ApiSettings(url="http://h/x", format="chat", max_n_per_request=9).per_request_limit(4) == 4
    assert ApiSettings(url="http://h/x", format="chat", model="gpt-x").per_request_limit(6) == 6
    assert ApiSettings(url="http://h/x", format="anthropic", max_n_per_request=5).per_request_limit(6) == 1
    assert ApiSettings(url="http://h/x", format="responses").per_request_limit(6) == 1


def test_surplus_is_cut_and_a_shortfall_asks_again(api: FakeApi) -> None:
    api.handler = lambda r: (200, {"completions": [f"s{i}" for i in range(5)]})
    client, _ = client_for(ApiSettings(url=api.url))
    assert client.completions("p", 3) == ["s0", "s1", "s2"]
    api.requests.clear()
    api.handler = lambda r: (200, {"completions": [f"one{r['index']}"]})
    assert client.completions("p", 3) == ["one0", "one1", "one2"]
    assert [b["num_return_sequences"] for b in api.bodies()] == [3, 2, 1]


# --- parsing ----------------------------------------------------------------------------------------------------

def test_generic_dotted_response_field(api: FakeApi) -> None:
    api.handler = lambda r: (200, {"data": {"items": [{"content": "deep"}, "flat"]}, "completions": ["ignored"]})
    client, _ = client_for(ApiSettings(url=api.url, response_field="data.items"))
    assert client.completions("p", 2) == ["deep", "flat"]


@pytest.mark.parametrize(("data", "expected"), [
    ({"responses": ["r1", "r2"]}, ["r1", "r2"]),
    ({"outputs": [{"text": "o"}]}, ["o"]),
    ({"choices": [{"message": {"content": "m"}}]}, ["m"]),
    ({"completions": [], "responses": ["falls through"]}, []),  # the named field exists: no fallback (as CoMLRL)
    ({"completions": "single"}, ["single"]),
    ({"completions": [{"completion": "c"}, {"response": "r"}, {"other": 1}, None, 3]}, ["c", "r", "3"]),
    ({"completions": {"text": "one dict"}}, ["one dict"]),
    ({"nothing": 1}, []),
    (["not", "a", "dict"], []),
])
def test_generic_fallbacks_and_item_shapes(data: Any, expected: list[str]) -> None:
    assert extract_completions(data, "generic") == expected


def test_generic_fallback_when_the_dotted_path_is_missing() -> None:
    assert extract_completions({"outputs": ["o"]}, "generic", "result.texts") == ["o"]
    assert extract_completions({"result": {"texts": ["t"]}, "outputs": ["o"]}, "generic", "result.texts") == ["t"]


def test_format_extractors_ignore_foreign_shapes() -> None:
    assert extract_completions({"choices": [{"message": {"content": 5}}, "junk"]}, "openai") == ["5"]
    assert extract_completions({"content": "not a list"}, "anthropic_messages") == []
    assert extract_completions({"output": [{"content": [{"type": "refusal", "refusal": "no"},
                                                        {"type": "text", "text": "t"}]}]}, "responses") == ["t"]
    assert extract_completions(None, "openai_responses") == []


def test_extra_body_is_merged_and_nulls_dropped(api: FakeApi) -> None:
    api.handler = _chat_echo
    extra = {"temperature": 0.0, "stop": ["\n"], "top_p": None}
    client, _ = client_for(ApiSettings(url=api.url, format="chat", extra_body=extra))  # no model configured
    client.completions("p", 1)
    assert api.bodies()[0] == {"messages": [{"role": "user", "content": "p"}], "n": 1, "max_tokens": 256,
                               "temperature": 0.0, "stop": ["\n"]}
    generic = ApiSettings(url=api.url, extra_body={"agent_idx": 9, "seed": 3}).payload("p", 1, agent_index=0, item={})
    assert generic["agent_idx"] == 9 and generic["seed"] == 3
    anthropic = ApiSettings(url=api.url, format="anthropic", extra_body={"system": "be brief"}).payload(
        "p", 1, agent_index=0, item={})
    assert anthropic["system"] == "be brief" and "model" not in anthropic


# --- errors and retries -----------------------------------------------------------------------------------------

def test_http_402_says_insufficient_balance(api: FakeApi) -> None:
    api.handler = lambda r: (402, {"error": {"message": f"Insufficient Balance for key {KEY}"}})
    client, delays = client_for(ApiSettings(url=api.url, api_key=KEY))
    with pytest.raises(ComparatorApiError) as info:
        client.completions("p", 1)
    message = str(info.value)
    assert "HTTP 402" in message and "insufficient balance" in message and api.url in message
    assert "Insufficient Balance for key ***" in message and KEY not in message  # the echoed key is redacted
    assert client.requests_sent == 1 and delays == []  # not retried


@pytest.mark.parametrize("status", [401, 403])
def test_refused_key_names_the_env_option(api: FakeApi, status: int) -> None:
    api.handler = lambda r: (status, "denied")
    client, delays = client_for(ApiSettings(url=api.url, api_key=KEY))
    with pytest.raises(ComparatorApiError, match=f"HTTP {status} \\(the API key was refused\\): denied") as info:
        client.completions("p", 1)
    assert "comparator_api_key_env" in str(info.value) and KEY not in str(info.value)
    assert client.requests_sent == 1 and delays == []


def test_401_without_a_key_says_none_was_sent(api: FakeApi) -> None:
    api.handler = lambda r: (401, "denied")
    client, _ = client_for(ApiSettings(url=api.url))
    with pytest.raises(ComparatorApiError, match="no API key was sent"):
        client.completions("p", 1)


def test_other_client_errors_are_not_retried(api: FakeApi) -> None:
    api.handler = lambda r: (404, {"error": "no such route"})
    client, delays = client_for(ApiSettings(url=api.url))
    with pytest.raises(ComparatorApiError, match="HTTP 404 .*no such route.*comparator_api_url's path"):
        client.completions("p", 1)
    assert client.requests_sent == 1 and delays == []


def test_500_then_success_is_retried_with_backoff(api: FakeApi) -> None:
    api.handler = lambda r: (500, "boom") if r["index"] == 0 else (503, "busy") if r["index"] == 1 else (
        200, {"completions": ["finally"]})
    client, delays = client_for(ApiSettings(url=api.url, retries=3, backoff_s=0.5))
    assert client.completions("p", 1) == ["finally"]
    assert delays == [0.5, 1.0] and client.requests_sent == 3
    assert api.bodies()[0] == api.bodies()[2]  # the same request again


def test_429_forever_fails_after_retries_plus_one_attempts(api: FakeApi) -> None:
    api.handler = lambda r: (429, f"slow down {KEY}")
    client, delays = client_for(ApiSettings(url=api.url, api_key=KEY, retries=2))
    with pytest.raises(ComparatorApiError) as info:
        client.completions("p", 1)
    message = str(info.value)
    assert "after 3 attempts" in message and "HTTP 429: slow down ***" in message and KEY not in message
    assert len(api.requests) == 3 and delays == [1.0, 2.0]


def test_500_forever_with_no_retries_makes_one_attempt(api: FakeApi) -> None:
    api.handler = lambda r: (500, "boom")
    client, delays = client_for(ApiSettings(url=api.url, retries=0))
    with pytest.raises(ComparatorApiError, match="after 1 attempt \\(last: HTTP 500: boom\\)"):
        client.completions("p", 1)
    assert len(api.requests) == 1 and delays == []


def test_connection_errors_are_retried() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed when the block ends: nothing listens there
    client, delays = client_for(ApiSettings(url=f"http://127.0.0.1:{port}/v1", retries=1, backoff_s=0.25))
    with pytest.raises(ComparatorApiError, match="after 2 attempts \\(last: connection failed"):
        client.completions("p", 1)
    assert client.requests_sent == 2 and delays == [0.25]


def test_a_timeout_is_retried_then_reported(api: FakeApi) -> None:
    api.handler = lambda r: (time.sleep(0.3), (200, {"completions": ["late"]}))[1]
    client, _ = client_for(ApiSettings(url=api.url, timeout=0.05, retries=0))
    with pytest.raises(ComparatorApiError, match="after 1 attempt .*comparator_api_timeout"):
        client.completions("p", 1)


def test_non_json_body_is_reported_with_an_excerpt(api: FakeApi) -> None:
    api.handler = lambda r: (200, "<html><body>Login required</body></html>" + "x" * 1000)
    client, delays = client_for(ApiSettings(url=api.url))
    with pytest.raises(ComparatorApiError, match="non-JSON body \\(HTTP 200\\): '<html><body>Login required") as info:
        client.completions("p", 1)
    shown = str(info.value).split("(HTTP 200): ")[1].split(". Fix:")[0]
    assert len(shown.strip("'")) == 300 and shown.strip("'").endswith("...")
    assert delays == []


@pytest.mark.parametrize(("fmt", "label"), [("generic", "a generic"), ("chat", "an OpenAI chat"),
                                            ("anthropic", "an Anthropic Messages"),
                                            ("responses", "an OpenAI Responses")])
def test_empty_completions_name_the_format(api: FakeApi, fmt: str, label: str) -> None:
    api.handler = lambda r: (200, {"completions": [], "choices": [], "content": [], "output": []})
    client, _ = client_for(ApiSettings(url=api.url, format=fmt))
    with pytest.raises(ComparatorApiError, match=f"no completions for {label} request \\(n=1\\)"):
        client.completions("p", 1)


def test_n_must_be_positive() -> None:
    client, _ = client_for(ApiSettings(url="http://127.0.0.1:9/x"))
    with pytest.raises(ValueError, match="n: must be >= 1"):
        client.completions("p", 0)
    assert client.requests_sent == 0


# --- settings ---------------------------------------------------------------------------------------------------

def test_the_key_never_shows_in_repr() -> None:
    settings = ApiSettings(url="https://user:pw@api.example/v1?key=QUERYSECRET", api_key=KEY,
                           headers={"Authorization": "Bearer HEADERSECRET", "X-Team": "blue"})
    text = repr(settings) + str(settings)
    for secret in (KEY, "HEADERSECRET", "QUERYSECRET", "pw"):
        assert secret not in text
    assert "api_key=***" in text and "'X-Team': 'blue'" in text and "https://api.example/v1?..." in text
    assert "api_key=None" in repr(ApiSettings(url="http://h/x"))


def test_a_header_secret_is_redacted_from_errors(api: FakeApi) -> None:
    api.handler = lambda r: (400, {"echo": r["headers"].get("x-api-token")})
    client, _ = client_for(ApiSettings(url=api.url, headers={"X-Api-Token": "HDR-SECRET-42"}))
    with pytest.raises(ComparatorApiError) as info:
        client.completions("p", 1)
    assert "HDR-SECRET-42" not in str(info.value) and '"echo": "***"' in str(info.value)
    assert api.requests[0]["headers"]["x-api-token"] == "HDR-SECRET-42"  # but it was sent


@pytest.mark.parametrize("url", ["ftp://h/x", "", "localhost:8000/v1", "http://", "file:///etc/passwd", None])
def test_url_must_be_http(url: str | None) -> None:
    with pytest.raises(ValueError, match="^comparator_api_url: "):
        ApiSettings(url=url)  # type: ignore[arg-type]


@pytest.mark.parametrize(("kwargs", "name"), [
    ({"timeout": 0}, "comparator_api_timeout"), ({"timeout": -1.5}, "comparator_api_timeout"),
    ({"max_n_per_request": 0}, "comparator_api_max_n_per_request"),
    ({"max_n_per_request": -2}, "comparator_api_max_n_per_request"),
    ({"max_n_per_request": 1.5}, "comparator_api_max_n_per_request"),
    ({"headers": ["not", "a", "dict"]}, "comparator_api_headers"),
    ({"extra_body": "x"}, "comparator_api_extra_body"),
    ({"format": "grpc"}, "comparator_api_format"),
    ({"retries": -1}, "comparator_api_retries"),
])
def test_bad_options_name_the_field(kwargs: dict[str, Any], name: str) -> None:
    with pytest.raises(ValueError, match=f"^{name}: "):
        ApiSettings(url="https://api.example/v1", **kwargs)


def test_normalize_api_format_aliases_and_error() -> None:
    cases = {None: "generic", "": "generic", "generic": "generic", "openai": "openai_chat", "chat": "openai_chat",
             "OpenAI_Chat": "openai_chat", "deepseek": "openai_chat", "anthropic": "anthropic_messages",
             "messages": "anthropic_messages", " anthropic-messages ": "anthropic_messages",
             "responses": "openai_responses", "codex": "openai_responses", "openai_responses": "openai_responses"}
    assert {value: normalize_api_format(value) for value in cases} == cases
    assert set(cases.values()) == set(API_FORMATS)
    with pytest.raises(ValueError, match="comparator_api_format: must be one of generic, openai_chat, .*got 'gemini'"):
        normalize_api_format("gemini")
    assert ApiSettings(url="http://h/x", format="codex").format == "openai_responses"


def test_from_config_reads_comlrl_names() -> None:
    config = MADPOIterConfig(
        comparator_policy="api", comparator_api_url="https://api.example/v1/chat/completions",
        comparator_api_format="openai", comparator_api_model="gpt-x", comparator_api_max_n_per_request=4,
        comparator_api_timeout=30, comparator_api_headers={"X-A": "1"}, comparator_api_key_header="X-Key",
        comparator_api_key_prefix="", comparator_api_response_field="out.texts", comparator_api_extra_body={"seed": 1},
        max_new_tokens=128, temperature=0.6, top_p=0.6, top_k=50, comparator_api_key="IGNORED-HERE")
    settings = ApiSettings.from_config(config, KEY)
    assert (settings.url, settings.format, settings.model, settings.max_n_per_request, settings.timeout) == (
        "https://api.example/v1/chat/completions", "openai_chat", "gpt-x", 4, 30.0)
    assert (settings.headers, settings.key_header, settings.key_prefix, settings.response_field) == (
        {"X-A": "1"}, "X-Key", "", "out.texts")
    assert (settings.extra_body, settings.max_new_tokens, settings.temperature, settings.top_p, settings.top_k) == (
        {"seed": 1}, 128, 0.6, 0.6, 50)
    assert settings.api_key == KEY and settings.headers_for_request()["X-Key"] == KEY  # empty prefix: the bare key
    bare = MARLHFIterConfig(comparator_policy="api", comparator_api_url="http://h/x")
    minimal = ApiSettings.from_config(bare, None)
    assert (minimal.format, minimal.timeout, minimal.key_header, minimal.key_prefix, minimal.retries) == (
        "generic", 120.0, "Authorization", "Bearer", 2)
    assert "authorization" not in {k.lower() for k in minimal.headers_for_request()}  # no key, no header
    no_url = MADPOIterConfig()
    with pytest.raises(ValueError, match="comparator_api_url: required"):
        ApiSettings.from_config(no_url, None)


def test_the_module_imports_no_torch() -> None:
    code = "import sys, engine.preference.api_client; print(sorted({'torch', 'transformers'} & set(sys.modules)))"
    root = Path(__file__).resolve().parents[3]
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root)
    assert result.stdout.strip() == "[]"
