"""Completions from an external HTTP LLM API, for the iterative trainers' ``comparator_policy="api"``.

Torch-free (stdlib only), with CoMLRL 1.4.3's ``comparator_api_*`` option names and behaviour:

- ``generic``: one JSON POST carries the prompt, ``agent_idx``, ``num_return_sequences``, the sampling
  settings and the batch item (made JSON-safe); completions are read from ``comparator_api_response_field``
  (a dotted path), else from ``completions``/``responses``/``outputs``/``choices``;
- ``openai_chat`` (also DeepSeek): a chat-completions request with ``n``, split into several requests when
  ``comparator_api_max_n_per_request`` (or a DeepSeek endpoint/model: one per request) says so;
- ``anthropic_messages`` and ``openai_responses``: one completion per request, as many requests as needed.

The key goes into ``comparator_api_key_header`` with ``comparator_api_key_prefix`` (Anthropic: ``x-api-key``,
no ``Bearer``). It never appears in a repr or an error message. CoopLab adds retries (with exponential
backoff) on HTTP 429/500/502/503/504 and on connection errors, and always returns exactly ``n`` completions.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from engine.preference.api_responses import extract_completions, normalize_api_format

_ONE_PER_REQUEST_FORMATS = frozenset({"anthropic_messages", "openai_responses"})
_FORMAT_LABELS = {
    "generic": "a generic", "openai_chat": "an OpenAI chat", "anthropic_messages": "an Anthropic Messages",
    "openai_responses": "an OpenAI Responses",
}
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
ANTHROPIC_VERSION = "2023-06-01"
EXCERPT_CHARS = 300
_SENSITIVE_HEADER_WORDS = ("auth", "key", "token", "secret", "cookie")


class ComparatorApiError(RuntimeError):
    """A comparator API request failed: the message names the URL, the HTTP status, a body excerpt and a fix."""


def safe_url(url: str) -> str:
    """``url`` fit for a message: no user info, no query or fragment (either could carry a key)."""
    parts = urllib.parse.urlsplit(str(url))
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = f"{host}:{port}" if port is not None else host
    shown = urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    return shown + ("?..." if parts.query else "")


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """``text`` on one line, cut to at most ``limit`` characters ('...' marks a cut)."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _is_sensitive_header(name: str) -> bool:
    """Whether a header's value may be a credential (its name mentions auth, key, token, secret or cookie)."""
    lowered = name.lower()
    return any(word in lowered for word in _SENSITIVE_HEADER_WORDS)


def _set_header(headers: dict[str, str], name: str, value: str, *, overwrite: bool = True) -> None:
    """Set a header, treating names case-insensitively (HTTP does; urllib would merge the spellings)."""
    existing = [key for key in headers if key.lower() == name.lower()]
    if existing and not overwrite:
        return
    for key in existing:
        del headers[key]
    headers[name] = value


def _optional_positive_int(value: Any, name: str) -> int | None:
    """``value`` as an int >= 1, or None; else ValueError naming the option."""
    if value is None:
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: must be an integer >= 1 or null, got {value!r}") from None
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()) or number < 1:
        raise ValueError(f"{name}: must be an integer >= 1 or null, got {value!r}")
    return number


def _mapping_or_none(value: Any, name: str) -> dict[str, Any] | None:
    """A copy of ``value`` as a dict, or None; else ValueError naming the option."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ValueError(f"{name}: must be a mapping or null, got {type(value).__name__}")
    return dict(value)


@dataclass(frozen=True, repr=False)
class ApiSettings:
    """Where and how to ask the comparator API (CoMLRL's ``comparator_api_*`` options, validated)."""

    url: str
    format: str = "generic"
    model: str | None = None
    max_n_per_request: int | None = None
    timeout: float = 120.0
    headers: dict[str, str] | None = None
    api_key: str | None = field(default=None, repr=False)
    key_header: str = "Authorization"
    key_prefix: str = "Bearer"
    response_field: str = "completions"
    extra_body: dict[str, Any] | None = None
    max_new_tokens: int = 256
    temperature: float = 0.7
    top_p: float = 0.9
    top_k: int | None = None
    retries: int = 2
    backoff_s: float = 1.0

    def __post_init__(self) -> None:
        url = str(self.url or "").strip()
        if not url:
            raise ValueError("comparator_api_url: required when comparator_policy='api'")
        parts = urllib.parse.urlsplit(url)
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            raise ValueError(f"comparator_api_url: must be an http:// or https:// address, got {safe_url(url)!r}")
        raw_format = str(self.format or "").strip().lower()
        max_n = _optional_positive_int(self.max_n_per_request, "comparator_api_max_n_per_request")
        if raw_format == "deepseek" and max_n is None:
            max_n = 1
        try:
            timeout = float(self.timeout)
        except (TypeError, ValueError):
            raise ValueError(f"comparator_api_timeout: must be a number of seconds > 0, got {self.timeout!r}") from None
        if not timeout > 0:
            raise ValueError(f"comparator_api_timeout: must be a number of seconds > 0, got {self.timeout!r}")
        if int(self.retries) < 0:
            raise ValueError(f"comparator_api_retries: must be >= 0, got {self.retries!r}")
        if float(self.backoff_s) < 0:
            raise ValueError(f"comparator_api_backoff_s: must be >= 0, got {self.backoff_s!r}")
        headers = _mapping_or_none(self.headers, "comparator_api_headers")
        values = {
            "url": url,
            "format": normalize_api_format(self.format),
            "model": str(self.model) if self.model else None,
            "max_n_per_request": max_n,
            "timeout": timeout,
            "headers": {str(k): str(v) for k, v in headers.items()} if headers is not None else None,
            "api_key": str(self.api_key) if self.api_key else None,
            "key_header": str(self.key_header or "Authorization"),
            "key_prefix": str(self.key_prefix or "").strip(),
            "response_field": str(self.response_field or ""),
            "extra_body": _mapping_or_none(self.extra_body, "comparator_api_extra_body"),
            "top_k": None if self.top_k is None else int(self.top_k),
            "retries": int(self.retries),
            "backoff_s": float(self.backoff_s),
        }
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def __repr__(self) -> str:
        """The settings without the key; credential-like header values and the URL's query are masked."""
        shown = []
        for f in fields(self):
            if not f.repr:
                continue
            value = getattr(self, f.name)
            if f.name == "url":
                value = safe_url(value)
            elif f.name == "headers" and value:
                value = {k: ("***" if _is_sensitive_header(k) else v) for k, v in value.items()}
            shown.append(f"{f.name}={value!r}")
        shown.append(f"api_key={'***' if self.api_key else None}")
        return f"ApiSettings({', '.join(shown)})"

    @classmethod
    def from_config(cls, config: Any, api_key: str | None) -> ApiSettings:
        """From a config object with CoMLRL's field names (read with getattr, missing ones take the defaults).

        Reads comparator_api_url, _format, _model, _max_n_per_request, _timeout, _headers, _key_header,
        _key_prefix, _response_field, _extra_body (and CoopLab's comparator_api_retries / _backoff_s where a
        config has them), max_new_tokens, temperature, top_p and top_k. The key comes already resolved (the
        caller reads comparator_api_key or the variable comparator_api_key_env names).
        """
        def opt(name: str, default: Any) -> Any:
            value = getattr(config, name, default)
            return default if value is None else value

        return cls(
            url=getattr(config, "comparator_api_url", None) or "",
            format=getattr(config, "comparator_api_format", None) or "generic",
            model=getattr(config, "comparator_api_model", None),
            max_n_per_request=getattr(config, "comparator_api_max_n_per_request", None),
            timeout=opt("comparator_api_timeout", 120.0),
            headers=getattr(config, "comparator_api_headers", None),
            api_key=api_key,
            key_header=opt("comparator_api_key_header", "Authorization"),
            key_prefix=getattr(config, "comparator_api_key_prefix", "Bearer"),  # null: the bare key (as CoMLRL)
            response_field=opt("comparator_api_response_field", "completions"),
            extra_body=getattr(config, "comparator_api_extra_body", None),
            max_new_tokens=opt("max_new_tokens", 256),
            temperature=opt("temperature", 0.7),
            top_p=opt("top_p", 0.9),
            top_k=getattr(config, "top_k", None),
            retries=opt("comparator_api_retries", 2),
            backoff_s=opt("comparator_api_backoff_s", 1.0),
        )

    def headers_for_request(self) -> dict[str, str]:
        """JSON content type, the user's headers, Anthropic's version default and the key header."""
        headers = {"Content-Type": "application/json"}
        for name, value in (self.headers or {}).items():
            _set_header(headers, name, value)
        anthropic = self.format == "anthropic_messages"
        if anthropic:
            _set_header(headers, "anthropic-version", ANTHROPIC_VERSION, overwrite=False)
        if self.api_key:
            name, prefix = self.key_header, self.key_prefix
            if anthropic and name.lower() == "authorization":
                name = "x-api-key"
            if anthropic and prefix.lower() == "bearer":
                prefix = ""
            _set_header(headers, name, f"{prefix} {self.api_key}" if prefix else self.api_key)
        return headers

    def is_deepseek(self) -> bool:
        """Whether the endpoint is DeepSeek's (its URL or model says so): one completion per request."""
        return "api.deepseek.com" in self.url.lower() or (self.model or "").lower().startswith("deepseek-")

    def per_request_limit(self, n: int) -> int:
        """How many of ``n`` completions one request may ask for.

        1 for Anthropic Messages and OpenAI Responses (no ``n``); else ``max_n_per_request`` capped at ``n``;
        else 1 for DeepSeek; else ``n``.
        """
        n = max(int(n), 1)
        if self.format in _ONE_PER_REQUEST_FORMATS:
            return 1
        if self.max_n_per_request is not None:
            return min(self.max_n_per_request, n)
        return 1 if self.is_deepseek() else n

    def payload(self, prompt: str, n: int, *, agent_index: int, item: dict) -> dict[str, Any]:
        """The JSON body of one request for ``n`` completions, per format; ``extra_body`` is merged last."""
        messages = [{"role": "user", "content": prompt}]
        if self.format == "generic":
            body: dict[str, Any] = {
                "prompt": prompt, "agent_idx": agent_index, "num_return_sequences": n,
                "max_new_tokens": self.max_new_tokens, "temperature": self.temperature, "top_p": self.top_p,
                "top_k": self.top_k, "batch_item": jsonable(item),
            }
            if self.model:
                body["model"] = self.model
            body.update(self.extra_body or {})
            return body
        if self.format == "openai_chat":
            body = {"model": self.model, "messages": messages, "n": n, "max_tokens": self.max_new_tokens,
                    "temperature": self.temperature, "top_p": self.top_p}
        elif self.format == "anthropic_messages":
            body = {"model": self.model, "max_tokens": self.max_new_tokens, "messages": messages,
                    "temperature": self.temperature}
        else:
            body = {"model": self.model, "input": prompt, "max_output_tokens": self.max_new_tokens}
        body.update(self.extra_body or {})
        return {key: value for key, value in body.items() if value is not None}


def jsonable(value: Any) -> Any:
    """``value`` if JSON can hold it; else dicts/lists converted item by item, scalars via ``.item()``, or str."""
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        pass
    if isinstance(value, Mapping):
        return {str(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(item) for item in value]
    if hasattr(value, "item"):
        try:
            return value.item()
        except Exception:
            pass
    return str(value)


class _RetryableFailure(Exception):
    """A failure worth another attempt (HTTP 429/5xx, a connection error or timeout); ``args[0]`` says what."""


def _status_fix(status: int, has_key: bool) -> tuple[str, str]:
    """What an HTTP error status means and how to fix it."""
    if status == 402:
        return "insufficient balance", "add credit to the provider account, or use a key whose account has some"
    if status in (401, 403):
        what = "the API key was refused" if has_key else "the API refused the request and no API key was sent"
        return what, ("set comparator_api_key_env to the environment variable that holds a valid key (or "
                      "comparator_api_key), and check comparator_api_key_header / comparator_api_key_prefix")
    if status == 404:
        return "not found", "check comparator_api_url's path (e.g. .../v1/chat/completions) and comparator_api_model"
    if 300 <= status < 400:
        return "redirected", "set comparator_api_url to the address the server redirects to"
    return "request rejected", ("check comparator_api_format, comparator_api_model and comparator_api_extra_body "
                                "against the provider's API")


class ApiClient:
    """Asks the comparator API for completions (see the module docstring); safe to share between threads."""

    requests_sent: int

    def __init__(self, settings: ApiSettings, *, sleep: Callable[[float], None] = time.sleep) -> None:
        self.settings = settings
        self._sleep = sleep
        self._lock = threading.Lock()
        self.requests_sent = 0  # HTTP requests sent, retries included

    def completions(self, prompt: str, n: int, *, agent_index: int = 0, item: dict | None = None) -> list[str]:
        """Exactly ``n`` completions of ``prompt``.

        Each request asks for ``min(per_request_limit(n), missing)``; Anthropic/Responses requests count one
        completion each (as CoMLRL). A request with no completions raises ``ComparatorApiError``; a surplus
        is cut to ``n``. Errors: HTTP 402 (insufficient balance), 401/403 (key refused), other 4xx, a non-JSON
        body; HTTP 429/5xx and connection errors are retried ``retries`` times before failing.
        """
        if int(n) < 1:
            raise ValueError(f"n: must be >= 1, got {n!r}")
        settings, n = self.settings, int(n)
        limit = settings.per_request_limit(n)
        out: list[str] = []
        while len(out) < n:
            ask = min(limit, n - len(out))
            data = self.send(settings.payload(prompt, ask, agent_index=agent_index, item=item or {}))
            texts = extract_completions(data, settings.format, settings.response_field)
            if not texts:
                field_hint = " and comparator_api_response_field" if settings.format == "generic" else ""
                raise self._error(
                    f"Comparator API at {safe_url(settings.url)} returned no completions for "
                    f"{_FORMAT_LABELS[settings.format]} request (n={ask}); response: "
                    f"{excerpt(self._redact(json.dumps(data, default=str)))}. Fix: check comparator_api_format"
                    f"{field_hint} against what the API returns")
            out.extend(texts[:1] if settings.format in _ONE_PER_REQUEST_FORMATS else texts)
        return out[:n]

    def send(self, payload: dict[str, Any]) -> Any:
        """POST ``payload`` as JSON and return the parsed JSON answer, retrying as configured."""
        settings = self.settings
        body = json.dumps(payload).encode("utf-8")
        attempts = settings.retries + 1
        last = ""
        for attempt in range(attempts):
            if attempt:
                self._sleep(settings.backoff_s * 2 ** (attempt - 1))
            try:
                status, raw = self._post_once(body)
            except _RetryableFailure as exc:
                last = str(exc.args[0])
                continue
            try:
                return json.loads(raw)
            except json.JSONDecodeError:
                raise self._error(
                    f"Comparator API at {safe_url(settings.url)} returned a non-JSON body (HTTP {status}): "
                    f"{excerpt(self._redact(raw))!r}. Fix: point comparator_api_url at the API endpoint itself "
                    "(not a web page or proxy login)") from None
        raise self._error(
            f"Comparator API at {safe_url(settings.url)} failed after {attempts} attempt"
            f"{'s' if attempts != 1 else ''} (last: {last}). Fix: check that the server is up and reachable; "
            "raise comparator_api_timeout or the retries if it is slow or rate-limited")

    def _post_once(self, body: bytes) -> tuple[int, str]:
        """One POST: (status, body text); ``_RetryableFailure`` or ``ComparatorApiError`` when it fails."""
        settings = self.settings
        request = urllib.request.Request(settings.url, data=body, headers=settings.headers_for_request(),
                                         method="POST")
        with self._lock:
            self.requests_sent += 1
        try:
            with urllib.request.urlopen(request, timeout=settings.timeout) as response:
                return int(response.status), response.read().decode("utf-8", errors="replace")
        except urllib.error.HTTPError as exc:
            detail = excerpt(self._redact(self._read_error_body(exc)))
            if exc.code in RETRY_STATUSES:
                raise _RetryableFailure(f"HTTP {exc.code}: {detail}") from None
            what, fix = _status_fix(exc.code, bool(settings.api_key))
            raise self._error(f"Comparator API at {safe_url(settings.url)} answered HTTP {exc.code} ({what}): "
                              f"{detail}. Fix: {fix}") from None
        except urllib.error.URLError as exc:
            raise _RetryableFailure(f"connection failed: {self._redact(str(exc.reason))}") from None
        except (TimeoutError, ConnectionError, http.client.HTTPException) as exc:
            raise _RetryableFailure(f"{type(exc).__name__}: {self._redact(str(exc))}") from None

    @staticmethod
    def _read_error_body(exc: urllib.error.HTTPError) -> str:
        """An HTTP error's body text ('' when it cannot be read)."""
        try:
            return exc.read().decode("utf-8", errors="replace")
        except Exception:
            return ""

    def _secrets(self) -> list[str]:
        """The strings no message may show: the key and credential-like header values."""
        secrets = [self.settings.api_key or ""]
        secrets += [v for k, v in (self.settings.headers or {}).items() if _is_sensitive_header(k)]
        return sorted((s for s in secrets if s), key=len, reverse=True)

    def _redact(self, text: str) -> str:
        """``text`` with every secret replaced by '***'."""
        for secret in self._secrets():
            text = text.replace(secret, "***")
        return text

    def _error(self, message: str) -> ComparatorApiError:
        """A ``ComparatorApiError`` with the message redacted."""
        return ComparatorApiError(self._redact(message))
