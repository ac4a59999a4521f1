"""Downloads: files built when the user asks for them, served by the dashboard's own HTTP route.

Streamlit's ``st.download_button`` with a callable keeps the callable in its deferred media storage
under an id that every rerun replaces, and deletes the generated file once a later script run
finishes; a second download clicked within about a second of the first (or during a live refresh)
then answers 404 (``MediaFileStorageError: Deferred file ... not found``). So when the dashboard
runs through ``app/server.py`` (``cooplab up`` / ``cooplab ui``), downloads are plain links to
``/api/download/<token>/<file name>``, a Starlette route of the same server:

- the token is random and belongs to one browser session; it stays the same across reruns (so a
  link on screen never goes stale) and expires :data:`TTL_S` seconds after the page last drew it;
- only a page that passed the sign-in gate draws links, so only signed-in sessions hold tokens;
- the file is produced when the request arrives and streamed in chunks (a 1M-point CSV is never
  held in memory), any number of times, concurrently.

Under ``streamlit run app/main.py`` (or in AppTest) there is no such route, and the links fall back
to ``st.download_button`` (``on_click="ignore"``: no rerun on click).
"""

from __future__ import annotations

import html
import io
import secrets
import threading
import time
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import streamlit as st

ROUTE = "/api/download"
TTL_S = 6 * 3600.0
SESSION_KEY = "_cooplab_download_tokens"

Chunks = Iterable[str | bytes] | str | bytes
Producer = Callable[[], Chunks]


@dataclass
class Offer:
    """A file a session may download: how to produce it, its name and type, until when."""

    produce: Producer
    file_name: str
    mime: str
    expires: float


_OFFERS: dict[str, Offer] = {}
_LOCK = threading.Lock()
_route = {"active": False}


def activate_route() -> None:
    """Called by ``app/server.py``: this process serves :data:`ROUTE`, so pages draw links to it."""
    _route["active"] = True


def route_active() -> bool:
    return _route["active"]


def register(token: str, offer: Offer) -> None:
    """Make ``token`` serve ``offer`` (and forget offers that expired)."""
    now = time.monotonic()
    with _LOCK:
        for old in [t for t, o in _OFFERS.items() if o.expires < now]:
            del _OFFERS[old]
        _OFFERS[token] = offer


def lookup(token: str) -> Offer | None:
    """The live offer behind ``token``, or None."""
    with _LOCK:
        offer = _OFFERS.get(token)
    if offer is None or offer.expires < time.monotonic():
        return None
    return offer


def chunks_of(produced: Chunks) -> Iterator[bytes]:
    """What a producer returned, as byte chunks."""
    if isinstance(produced, str | bytes):
        produced = (produced,)
    for chunk in produced:
        yield chunk.encode("utf-8") if isinstance(chunk, str) else bytes(chunk)


def _session_token(key: str) -> str:
    tokens = st.session_state.setdefault(SESSION_KEY, {})
    if key not in tokens:
        tokens[key] = secrets.token_urlsafe(24)
    return tokens[key]


def url_for(token: str, file_name: str) -> str:
    return f"{ROUTE}/{token}/{file_name}"


_STYLE = ("display:inline-flex;align-items:center;gap:0.3rem;padding:0.25rem 0.75rem;"
          "border:1px solid rgba(49,51,63,0.2);border-radius:0.5rem;text-decoration:none;"
          "color:inherit;font-size:0.9rem;line-height:1.6;white-space:nowrap;")


def offer(label: str, produce: Producer, *, file_name: str, mime: str, key: str,
          help: str | None = None) -> None:
    """A download of ``produce()`` (str, bytes or an iterable of chunks), built on request."""
    if not route_active():
        st.download_button(label, lambda: b"".join(chunks_of(produce())), file_name=file_name, mime=mime,
                           key=key, on_click="ignore", help=help, icon=":material/download:")
        return
    token = _session_token(key)
    register(token, Offer(produce, file_name, mime, time.monotonic() + TTL_S))
    title = f' title="{html.escape(help)}"' if help else ""
    st.html(f'<a class="cooplab-download" data-testid="cooplab-download" href="{html.escape(url_for(token, file_name))}" '
            f'download="{html.escape(file_name)}" style="{_STYLE}"{title}>&#x2193;&nbsp;{html.escape(label)}</a>')


async def serve(request: Any) -> Any:
    """The Starlette endpoint of :data:`ROUTE`: stream the offer's file, or 404 for an unknown token."""
    from starlette.responses import PlainTextResponse, StreamingResponse

    found = lookup(request.path_params.get("token", ""))
    if found is None:
        return PlainTextResponse("This download link is not valid (any more): reload the dashboard page "
                                 "and click the download again.", status_code=404)
    safe_name = "".join(c if c.isalnum() or c in "._-" else "_" for c in found.file_name)
    headers = {"Content-Disposition": f'attachment; filename="{safe_name}"', "Cache-Control": "no-store"}
    return StreamingResponse(chunks_of(found.produce()), media_type=found.mime, headers=headers)


def routes() -> list[Any]:
    """The Starlette routes ``app/server.py`` adds to the dashboard's server."""
    from starlette.routing import Route

    return [Route(ROUTE + "/{token}/{name}", serve, methods=["GET"])]


def zip_folder(path: str | Path) -> bytes:
    """A zip archive of a checkpoint folder (or of a single checkpoint file)."""
    root = Path(path)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        if root.is_file():
            archive.write(root, root.name)
        else:
            for file in sorted(root.rglob("*")):
                if file.is_file():
                    archive.write(file, str(Path(root.name) / file.relative_to(root)))
    return buffer.getvalue()


def file_chunks(path: str | Path, size: int = 1 << 16) -> Iterator[bytes]:
    """A file's bytes in chunks (a run's whole log)."""
    with Path(path).open("rb") as handle:
        while chunk := handle.read(size):
            yield chunk


def exported_models(output_dir: str | None) -> list[str]:
    """The Hugging Face model folders a completed run exported under ``<output_dir>/model``.

    One folder per distinct model (``config.json`` inside); a single-model export is the folder
    itself.
    """
    if not output_dir:
        return []
    root = Path(output_dir) / "model"
    if not root.is_dir():
        return []
    if (root / "config.json").is_file():
        return [str(root)]
    return sorted(str(p) for p in root.iterdir() if p.is_dir() and (p / "config.json").is_file())
