"""The variables of a worker whose artifact store is a bucket on the test's S3 server."""

from __future__ import annotations

import os

import pytest

from jobs.settings import Settings
from tests.artifacts.seaweed import ACCESS_KEY, SECRET_KEY, SeaweedServer


def use_s3(monkeypatch: pytest.MonkeyPatch, server: SeaweedServer, bucket: str, *, secret: str = SECRET_KEY,
           tries: int = 3) -> Settings:
    """The variables of a worker whose artifact store is ``bucket`` on ``server``; its settings."""
    for key in list(os.environ):
        if key.startswith("AWS_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("COOPLAB_ARTIFACTS_URL", f"s3://{bucket}/lab")
    monkeypatch.setenv("AWS_ENDPOINT_URL", server.endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
    monkeypatch.setenv("COOPLAB_ARTIFACTS_TRIES", str(tries))
    monkeypatch.setenv("COOPLAB_ARTIFACTS_RETRY_BASE_S", "0.1")
    monkeypatch.setenv("COOPLAB_ARTIFACTS_PART_MIB", "5")
    return Settings()
