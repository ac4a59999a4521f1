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

Each request resolves the host once and connects to those addresses (:mod:`engine.preference.api_transport`);
redirects are not followed. Given the operator's API hosts (``hosts``, :mod:`engine.permissions.outbound`), every request
is checked first: the scheme, the key's binding (``key_variable``) and every address the name resolves to,
so a name that turns into 127.0.0.1 after pre-flight (DNS rebinding) is refused, not connected to.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Callable
from typing import Any

from engine.permissions.outbound import ApiHosts, OutboundRefused, Resolver, checked_target, resolve
from engine.preference.api_responses import extract_completions
from engine.preference.api_settings import ONE_PER_REQUEST_FORMATS, ApiSettings, safe_url
from engine.preference.api_transport import post
from engine.schema.secrets import is_sensitive_header

_FORMAT_LABELS = {
    "generic": "a generic", "openai_chat": "an OpenAI chat", "anthropic_messages": "an Anthropic Messages",
    "openai_responses": "an OpenAI Responses",
}
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
EXCERPT_CHARS = 300


def target_host(url: str) -> str:
    """The host ``url`` names (for a message)."""
    return safe_url(url).split("://", 1)[-1].split("/", 1)[0]


class ComparatorApiError(RuntimeError):
    """A comparator API request failed: the message names the URL, the HTTP status, a body excerpt and a fix."""


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """``text`` on one line, cut to at most ``limit`` characters ('...' marks a cut)."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


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

    def __init__(self, settings: ApiSettings, *, sleep: Callable[[float], None] = time.sleep,
                 hosts: ApiHosts | None = None, key_variable: str | None = None, resolver: Resolver = resolve) -> None:
        """``hosts``: the operator's API hosts every request is checked against (None: not checked, a
        library caller's own client); ``key_variable``: the variable the key came from (bound to hosts)."""
        self.settings = settings
        self._sleep = sleep
        self._hosts, self._key_variable, self._resolver = hosts, key_variable, resolver
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
            out.extend(texts[:1] if settings.format in ONE_PER_REQUEST_FORMATS else texts)
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
        try:
            target = checked_target(settings.url, self._hosts, key_variable=self._key_variable,
                                    has_key=bool(settings.api_key), resolver=self._resolver,
                                    check=self._hosts is not None)
        except OutboundRefused as exc:
            raise self._error(f"Comparator API at {safe_url(settings.url)} was not asked: {exc}") from None
        except OSError as exc:
            raise _RetryableFailure(f"connection failed: cannot resolve {target_host(settings.url)} "
                                    f"({self._redact(str(exc))})") from None
        with self._lock:
            self.requests_sent += 1
        try:
            reply = post(target, body, settings.headers_for_request(), settings.timeout)
        except (OSError, http.client.HTTPException) as exc:
            kind = "timed out" if isinstance(exc, TimeoutError) else f"{type(exc).__name__}"
            raise _RetryableFailure(f"connection failed: {kind}: {self._redact(str(exc))}") from None
        if reply.status < 300:
            return reply.status, reply.text
        detail = excerpt(self._redact(reply.text))
        if reply.status in RETRY_STATUSES:
            raise _RetryableFailure(f"HTTP {reply.status}: {detail}")
        what, fix = _status_fix(reply.status, bool(settings.api_key))
        raise self._error(f"Comparator API at {safe_url(settings.url)} answered HTTP {reply.status} ({what}): "
                          f"{detail}. Fix: {fix}")

    def _secrets(self) -> list[str]:
        """The strings no message may show: the key and credential-like header values."""
        secrets = [self.settings.api_key or ""]
        secrets += [v for k, v in (self.settings.headers or {}).items() if is_sensitive_header(k)]
        return sorted((s for s in secrets if s), key=len, reverse=True)

    def _redact(self, text: str) -> str:
        """``text`` with every secret replaced by '***'."""
        for secret in self._secrets():
            text = text.replace(secret, "***")
        return text

    def _error(self, message: str) -> ComparatorApiError:
        """A ``ComparatorApiError`` with the message redacted."""
        return ComparatorApiError(self._redact(message))
