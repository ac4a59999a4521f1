"""The settings of a comparator API client (CoMLRL 1.4.3's ``comparator_api_*`` options), validated, with
the request each format sends: headers (the key in ``comparator_api_key_header`` after
``comparator_api_key_prefix``; Anthropic: ``x-api-key`` without ``Bearer``, and ``anthropic-version``),
how many completions one request may ask for, and the JSON body. Stdlib only; the key never appears in
a repr.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from engine.preference.api_responses import normalize_api_format
from engine.schema.secrets import is_sensitive_header

if TYPE_CHECKING:
    from engine.schema.preference_configs import MADPOIterConfig, MARLHFIterConfig

ONE_PER_REQUEST_FORMATS = frozenset({"anthropic_messages", "openai_responses"})
ANTHROPIC_VERSION = "2023-06-01"


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
                value = {k: ("***" if is_sensitive_header(k) else v) for k, v in value.items()}
            shown.append(f"{f.name}={value!r}")
        shown.append(f"api_key={'***' if self.api_key else None}")
        return f"ApiSettings({', '.join(shown)})"

    @classmethod
    def from_config(cls, config: MADPOIterConfig | MARLHFIterConfig, api_key: str | None) -> ApiSettings:
        """From an iterative trainer's config (CoMLRL's field names): comparator_api_url, _format, _model,
        _max_n_per_request, _timeout, _headers, _key_header, _key_prefix, _response_field, _extra_body,
        _retries, max_new_tokens, temperature, top_p and top_k. The key comes already resolved (the caller
        reads comparator_api_key or the variable comparator_api_key_env names).
        """
        return cls(
            url=config.comparator_api_url or "",
            format=config.comparator_api_format,
            model=config.comparator_api_model,
            max_n_per_request=config.comparator_api_max_n_per_request,
            timeout=config.comparator_api_timeout,
            headers=config.comparator_api_headers,
            api_key=api_key,
            key_header=config.comparator_api_key_header,
            key_prefix=config.comparator_api_key_prefix,
            response_field=config.comparator_api_response_field,
            extra_body=config.comparator_api_extra_body,
            max_new_tokens=config.max_new_tokens,
            temperature=config.temperature,
            top_p=config.top_p,
            top_k=config.top_k,
            retries=config.comparator_api_retries,
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
        if self.format in ONE_PER_REQUEST_FORMATS:
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
