"""Where ``cooplab export mlflow`` takes a tracking URI and an artifact location from, and how it
shows them: pure functions (issue #38, item 6)."""

from __future__ import annotations

import pytest

from jobs.mlflow_export.artifacts import (
    ArtifactLocationError,
    TrackingUriError,
    artifact_folder,
    check_tracking_uri,
)
from jobs.mlflow_export.redact import redact_message

PASSWORD = "s3cret-Pw"  # noqa: S105 - the secret a message must never show


@pytest.mark.parametrize(
    ("location", "folder"),
    [
        ("mlflow-artifacts:/1/abc/artifacts", "1/abc/artifacts"),
        ("mlflow-artifacts://127.0.0.1:5000/1/abc/artifacts", "1/abc/artifacts"),
        ("mlflow-artifacts:/1/a%20b/artifacts", "1/a%20b/artifacts"),
    ],
)
def test_an_artifact_location_on_the_tracking_server_is_its_folder_there(location, folder):
    assert artifact_folder("http://u:pw@127.0.0.1:5000", location) == folder


@pytest.mark.parametrize(
    "location",
    [
        "file:///home/me/.bashrc.d",
        "/home/me/.ssh",
        "relative/folder",
        "C:\\Users\\me",
        "s3://bucket/1/abc/artifacts",
        "gs://bucket/x",
        "http://127.0.0.1:5000/x",
        "mlflow-artifacts://other-host:5000/1/abc/artifacts",
        "mlflow-artifacts:/1/../../../etc",
        "mlflow-artifacts:/",
        "mlflow-artifacts:/1/x?y=z",
        "",
    ],
)
def test_an_artifact_location_elsewhere_is_refused(location):
    with pytest.raises(ArtifactLocationError, match="is not the tracking server's artifact API"):
        artifact_folder("http://u:pw@127.0.0.1:5000", location)


@pytest.mark.parametrize("uri", ["http://h:5000", "https://u:p@h/mlflow/"])
def test_http_tracking_uris_are_taken(uri):
    check_tracking_uri(uri)


@pytest.mark.parametrize(
    "uri", ["sqlite:///m.db", "./mlruns", "file:///m", "databricks", "postgresql://u:p@h/db", "http://", "ftp://h/x"]
)
def test_other_tracking_uris_are_refused_without_their_password(uri):
    with pytest.raises(TrackingUriError) as refused:
        check_tracking_uri(uri)
    assert ":p@" not in str(refused.value)


def test_a_message_naming_the_tracking_uri_anywhere_is_masked():
    uri = f"https://me:{PASSWORD}@mlflow.example:8443/base"
    message = (
        f"API request to {uri}/api/2.0/mlflow/runs/create failed with exception "
        f"HTTPSConnectionPool(host='mlflow.example') (caused by {uri})"
    )
    shown = redact_message(message, uri)
    assert PASSWORD not in shown
    assert shown.count("https://me:***@mlflow.example:8443/base") == 2
    assert redact_message(f"odd {PASSWORD.replace('-', '%2D')} and {PASSWORD}", uri.replace("-", "%2D")) == (
        "odd *** and ***"
    )
