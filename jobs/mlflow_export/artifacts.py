"""Where an export's artifacts go: only into the tracking server's own artifact API.

MLflow's client writes a run's artifacts wherever the server's ``artifact_uri`` for the run points:
``file:///...`` or a bare path is a folder on *this* machine, ``s3://...`` a bucket reached with this
machine's credentials. A hostile or misconfigured tracking server would choose where the export
writes. So the export takes only an ``http(s)://`` tracking URI (:func:`check_tracking_uri`), accepts
only an artifact location inside that server's proxied artifact API (``mlflow-artifacts:/<path>``,
what ``mlflow server`` hands out unless started with ``--no-serve-artifacts``;
:func:`artifact_folder`), and uploads with :class:`ServerArtifacts`: HTTP ``PUT`` to
``<tracking URI>/api/2.0/mlflow-artifacts/artifacts/<path>/<file>``, the URL built here from the
tracking URI the user gave, never from the server's answer. Nothing is written on this machine.
"""

from __future__ import annotations

import mimetypes
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

from db.urls import redact_url

ARTIFACT_API = "/api/2.0/mlflow-artifacts/artifacts"
_SCHEME = "mlflow-artifacts"
_SHOWN = 200  # characters of a server-given location shown in a message


class TrackingUriError(ValueError):
    """A ``--tracking-uri`` that is not an MLflow tracking server's ``http(s)://`` address."""


class ArtifactLocationError(ValueError):
    """An artifact location the tracking server gave that is not inside its own artifact API."""


def _shown(text: str) -> str:
    """A server-given text as a message may show it: password masked, one printable line, cut."""
    flat = "".join(c if c.isprintable() else "?" for c in redact_url(text))
    return flat if len(flat) <= _SHOWN else flat[: _SHOWN - 1] + "…"


def check_tracking_uri(uri: str) -> None:
    """Raise :class:`TrackingUriError` unless ``uri`` is an ``http://`` or ``https://`` server address."""
    try:
        parts = urlsplit(uri)
        host = parts.hostname
    except ValueError:
        host = None
        parts = None
    if parts is not None and parts.scheme in ("http", "https") and host:
        return
    raise TrackingUriError(
        f"--tracking-uri {_shown(uri)!r}: give an MLflow tracking server (http:// or https://); a "
        "database or folder (sqlite://, file://, a path) is not taken, as the export writes artifacts "
        "only through a server's artifact API: start one (`mlflow server --backend-store-uri "
        "sqlite:///mlflow.db`) and give its address (--tracking-uri http://127.0.0.1:5000)"
    )


def _host(netloc: str) -> str:
    return netloc.rpartition("@")[2].lower()


def artifact_folder(tracking_uri: str, location: str, whose: str = "the run") -> str:
    """The folder (``1/<run id>/artifacts``, as the server wrote it) that the artifact ``location`` the
    tracking server gave for ``whose`` names inside the server's own artifact API.

    Only ``mlflow-artifacts:/<path>`` is taken (with a host, only the tracking server's own), without
    ``.`` or ``..`` segments, query or fragment; anything else (``file://``, a bare path, ``s3://``,
    another host) raises :class:`ArtifactLocationError`, naming the location.
    """
    try:
        parts = urlsplit(location)
        ok = parts.scheme == _SCHEME and not parts.query and not parts.fragment
        ok = ok and (not parts.netloc or _host(parts.netloc) == _host(urlsplit(tracking_uri).netloc))
    except ValueError:
        ok = False
    segments = [s for s in parts.path.split("/") if s] if ok else []
    decoded = [unquote(s) for s in segments]
    if not segments or any(d in (".", "..") or "/" in d or "\\" in d for d in decoded):
        raise ArtifactLocationError(
            f"the tracking server says {whose} keeps its artifacts at {_shown(location)!r}, which is not "
            f"the tracking server's artifact API ({_SCHEME}:/...): the export uploads artifacts only "
            "through that API and writes nowhere a server names; let the server serve artifacts "
            "(`mlflow server` does unless --no-serve-artifacts) and export into an experiment made "
            "while it does (--experiment NAME)"
        )
    return "/".join(segments)


class ServerArtifacts:
    """Uploads into one run's folder of the tracking server's artifact API, as MLflow's own client
    does (HTTP ``PUT`` of each file, with the tracking URI's credentials and MLflow's retries)."""

    def __init__(self, tracking_uri: str, folder: str) -> None:
        from mlflow.utils.credentials import get_default_host_creds

        check_tracking_uri(tracking_uri)
        self._creds = get_default_host_creds(tracking_uri.rstrip("/"))
        self._root = f"{ARTIFACT_API}/{folder}"

    def put_file(self, local: Path, artifact_path: str = "") -> None:
        """Upload the file ``local`` as ``<artifact_path>/<its name>``."""
        from mlflow.exceptions import MlflowException
        from mlflow.utils.rest_utils import http_request

        names = [*(p for p in artifact_path.split("/") if p), local.name]
        endpoint = f"{self._root}/" + "/".join(quote(name, safe="") for name in names)
        kind = mimetypes.guess_type(local.name)[0] or "application/octet-stream"
        with local.open("rb") as data:
            answer = http_request(
                self._creds, endpoint, "PUT", data=data, extra_headers={"Content-Type": kind}
            )
        if answer.status_code >= 400:
            raise MlflowException(
                f"uploading {'/'.join(names)!r} to its artifact API answered HTTP {answer.status_code}: "
                f"{_shown(answer.text)}"
            )

    def put_folder(self, folder: Path, artifact_path: str) -> None:
        """Upload every file under ``folder`` (not following linked folders) under ``artifact_path``."""
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                inside = path.parent.relative_to(folder).as_posix()
                self.put_file(path, artifact_path if inside == "." else f"{artifact_path}/{inside}")
