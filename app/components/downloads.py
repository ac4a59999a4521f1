"""Downloads: files built when the user asks for them, served by the dashboard's own HTTP route.

Streamlit's ``st.download_button`` with a callable keeps the callable in its deferred media storage
under an id that every rerun replaces, and deletes the generated file once a later script run
finishes; a second download clicked within about a second of the first (or during a live refresh)
then answers 404 (``MediaFileStorageError: Deferred file ... not found``). So when the dashboard
runs through ``app/server.py`` (``cooplab up`` / ``cooplab ui``), downloads are plain links to
``/api/download/<token>/<file name>``, a Starlette route of the same server:

- the token is random and belongs to one browser session; it stays the same across reruns (so a
  link on screen never goes stale) and expires :data:`TTL_S` seconds after the page last drew it;
- it is bound to the browser that was shown it (its ``cooplab_browser`` cookie, set by the server's
  guard, ``app/guard.py``): the link without that cookie (``curl``, another browser) answers 404;
- Sign out revokes every token of the session (:func:`revoke_session`); only a page that passed the
  sign-in gate draws links, so only signed-in sessions hold tokens;
- the file is produced in a worker thread when the request arrives and streamed in chunks (a
  checkpoint zip or a 1M-point CSV is never held in memory, and the server's event loop never waits
  on it); at most ``COOPLAB_UI_MAX_DOWNLOADS`` downloads stream at once, one more is answered 503;
- a file whose producer fails on the artifact store (``app/run_files.py``: the store does not answer,
  or its copy fails its check) is answered 503 with the store's one-line reason, before any byte.

Under ``streamlit run app/main.py`` (or in AppTest) there is no such route, and the links fall back
to ``st.download_button`` (``on_click="ignore"``: no rerun on click). So does a session of a server
that requires sign-in whose browser has no ``cooplab_browser`` cookie: its links could not be bound.
"""

from __future__ import annotations

import contextlib
import functools
import hmac
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

from app.access import signin_required
from app.hosts import BROWSER_COOKIE, browser_id

ROUTE = "/api/download"
TTL_S = 6 * 3600.0
SESSION_KEY = "_cooplab_download_tokens"

Chunks = Iterable[str | bytes] | str | bytes
Producer = Callable[[], Chunks]


@dataclass
class Offer:
    """A file a session may download: how to produce it, its name and type, until when, and the
    browser (its ``cooplab_browser`` cookie) that may fetch it (None: any holder of the token)."""

    produce: Producer
    file_name: str
    mime: str
    expires: float
    browser: str | None = None


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


def lookup(token: str, browser: str | None = None) -> Offer | None:
    """The live offer behind ``token`` for a request from ``browser``, or None."""
    with _LOCK:
        offer = _OFFERS.get(token)
    if offer is None or offer.expires < time.monotonic():
        return None
    if offer.browser is not None and not (browser and hmac.compare_digest(offer.browser, browser)):
        return None
    return offer


def revoke(tokens: Iterable[str]) -> None:
    """Forget these tokens: their links answer 404 from now on."""
    with _LOCK:
        for token in tokens:
            _OFFERS.pop(token, None)


def revoke_session() -> None:
    """Revoke every download link this session was given (at sign-out)."""
    revoke(st.session_state.pop(SESSION_KEY, {}).values())


class Slots:
    """How many downloads stream at once: :meth:`take` says no when ``limit`` are already running."""

    def __init__(self) -> None:
        self.busy = 0
        self._lock = threading.Lock()

    def take(self, limit: int) -> bool:
        with self._lock:
            if self.busy >= limit:
                return False
            self.busy += 1
            return True

    def give_back(self) -> None:
        with self._lock:
            self.busy -= 1


SLOTS = Slots()


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


def _browser() -> str | None:
    return browser_id(st.context.cookies.get(BROWSER_COOKIE))


def offer(label: str, produce: Producer, *, file_name: str, mime: str, key: str,
          help: str | None = None) -> None:
    """A download of ``produce()`` (str, bytes or an iterable of chunks), built on request."""
    browser = _browser() if route_active() else None
    if not route_active() or (browser is None and signin_required(str(st.get_option("server.address") or ""))):
        st.download_button(label, lambda: b"".join(chunks_of(produce())), file_name=file_name, mime=mime,
                           key=key, on_click="ignore", help=help, icon=":material/download:")
        return
    token = _session_token(key)
    register(token, Offer(produce, file_name, mime, time.monotonic() + TTL_S, browser))
    title = f' title="{html.escape(help)}"' if help else ""
    st.html(f'<a class="cooplab-download" data-testid="cooplab-download" href="{html.escape(url_for(token, file_name))}" '
            f'download="{html.escape(file_name)}" style="{_STYLE}"{title}>&#x2193;&nbsp;{html.escape(label)}</a>')


NOT_VALID = ("This download link is not valid (any more): reload the dashboard page and click the download "
             "again (links work only in the browser that showed them, until its session signs out).")


async def serve(request: Any) -> Any:
    """The Starlette endpoint of :data:`ROUTE`: stream the offer's file from a worker thread; 404 for
    an unknown, expired or revoked token or another browser's link; 503 when enough downloads run."""
    from starlette.concurrency import iterate_in_threadpool, run_in_threadpool
    from starlette.responses import PlainTextResponse

    from jobs.artifacts.errors import ArtifactStoreError
    from jobs.settings import get_settings

    found = lookup(request.path_params.get("token", ""), browser_id(request.cookies.get(BROWSER_COOKIE)))
    if found is None:
        return PlainTextResponse(NOT_VALID, status_code=404, headers={"Cache-Control": "no-store"})
    limit = get_settings().ui_max_downloads
    if not SLOTS.take(limit):
        return PlainTextResponse(f"The dashboard is already sending {limit} downloads (COOPLAB_UI_MAX_DOWNLOADS): "
                                 "try again when one of them has finished.", status_code=503,
                                 headers={"Retry-After": "10", "Cache-Control": "no-store"})
    release = _Release()
    try:
        chunks = await run_in_threadpool(lambda: chunks_of(found.produce()))
    except ArtifactStoreError as exc:  # the store did not answer, or its copy failed its check
        release()
        return PlainTextResponse(f"{found.file_name} could not be downloaded: {exc}", status_code=503,
                                 headers={"Retry-After": "30", "Cache-Control": "no-store"})
    except BaseException:
        release()
        raise

    async def body() -> Any:
        try:
            async for chunk in iterate_in_threadpool(chunks):
                yield chunk
        finally:
            release()
            with contextlib.suppress(ValueError):  # a thread still making the next chunk closes it later
                await run_in_threadpool(chunks.close)

    safe_name = "".join(c if c.isalnum() or c in "._-" else "_" for c in found.file_name)
    headers = {"Content-Disposition": f'attachment; filename="{safe_name}"', "Cache-Control": "no-store"}
    return _stream_response()(body(), release, media_type=found.mime, headers=headers)


class _Release:
    """Gives the download's slot back, once, however the download ends."""

    def __init__(self) -> None:
        self._done = False
        self._lock = threading.Lock()

    def __call__(self) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
        SLOTS.give_back()


@functools.cache
def _stream_response() -> type:
    """A StreamingResponse that gives its slot back when sending ends, also when the client went away
    before the body started (the body's own ``finally`` then never runs)."""
    from starlette.responses import StreamingResponse

    class SlotStreamingResponse(StreamingResponse):
        def __init__(self, content: Any, release: _Release, **kwargs: Any) -> None:
            super().__init__(content, **kwargs)
            self.release = release

        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            try:
                await super().__call__(scope, receive, send)
            finally:
                self.release()

    return SlotStreamingResponse


def routes() -> list[Any]:
    """The Starlette routes ``app/server.py`` adds to the dashboard's server."""
    from starlette.routing import Route

    return [Route(ROUTE + "/{token}/{name}", serve, methods=["GET"])]


class _Pipe(io.RawIOBase):
    """A write-only stream whose written bytes are taken out as they come (zipfile writes a stream
    it cannot seek with data descriptors, so an archive can be sent while it is being made)."""

    def __init__(self) -> None:
        super().__init__()
        self._parts: list[bytes] = []

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self._parts.append(bytes(data))
        return len(data)

    def take(self) -> bytes:
        data = b"".join(self._parts)
        self._parts.clear()
        return data


def zip_folder(path: str | Path, block: int = 1 << 20) -> Iterator[bytes]:
    """A zip archive of a checkpoint folder (or of a single checkpoint file), made while it is sent:
    chunks of about ``block`` bytes, never the whole archive in memory. Symbolic links are left out."""
    root = Path(path)
    if root.is_file():
        files = [(root, root.name)]
    else:
        files = [(f, str(Path(root.name) / f.relative_to(root))) for f in sorted(root.rglob("*"))
                 if f.is_file() and not f.is_symlink()]
    pipe = _Pipe()
    with zipfile.ZipFile(pipe, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for file, name in files:
            info = zipfile.ZipInfo.from_file(file, name)
            info.compress_type = zipfile.ZIP_DEFLATED
            with file.open("rb") as source, archive.open(info, "w") as target:
                while data := source.read(block):
                    target.write(data)
                    if out := pipe.take():
                        yield out
            if out := pipe.take():
                yield out
    yield pipe.take()  # the central directory


def file_chunks(path: str | Path, size: int = 1 << 16) -> Iterator[bytes]:
    """A file's bytes in chunks (a run's whole log)."""
    with Path(path).open("rb") as handle:
        while chunk := handle.read(size):
            yield chunk


def exported_models(output_dir: str | None, folder: str = "model") -> list[str]:
    """The Hugging Face model folders a completed run exported under ``<output_dir>/<folder>``
    (``model``: the last weights; ``model_best``: the best checkpoint's, when the run kept one).

    One folder per distinct model (``config.json`` inside); a single-model export is the folder
    itself.
    """
    if not output_dir:
        return []
    root = Path(output_dir) / folder
    if not root.is_dir():
        return []
    if (root / "config.json").is_file():
        return [str(root)]
    return sorted(str(p) for p in root.iterdir() if p.is_dir() and (p / "config.json").is_file())
