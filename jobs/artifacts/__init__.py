"""Run artifacts (checkpoints, model folders) in one store every machine reaches.

``open_store(settings)`` opens the store ``COOPLAB_ARTIFACTS_URL`` names: the local data directory
(unset), a shared folder (``file:///...``) or an S3-compatible bucket (``s3://bucket/prefix``, with
``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_DEFAULT_REGION``).
:class:`ArtifactStore` uploads a folder and checks it before marking it complete, lists the complete
ones, downloads the newest into a local cache, deletes, streams one object and reports free space.
"""

from __future__ import annotations

from jobs.artifacts.errors import (
    ArtifactStoreError,
    CacheFull,
    NotComplete,
    StoreRefused,
    StoreUnavailable,
    TamperedMarker,
    VerificationFailed,
)
from jobs.artifacts.location import FILE, LOCAL, S3, Location, parse_location
from jobs.artifacts.manifest import FileEntry, Manifest
from jobs.artifacts.store import ArtifactStore
from jobs.settings import S3Env, Settings, get_settings

__all__ = [
    "FILE",
    "LOCAL",
    "S3",
    "ArtifactStore",
    "ArtifactStoreError",
    "CacheFull",
    "FileEntry",
    "Location",
    "Manifest",
    "NotComplete",
    "StoreRefused",
    "StoreUnavailable",
    "TamperedMarker",
    "VerificationFailed",
    "check_store",
    "open_store",
    "parse_location",
]


def open_store(settings: Settings | None = None, *, s3_env: S3Env | None = None) -> ArtifactStore:
    """The store of ``settings.artifacts_url`` (``ValueError`` naming a bad URL); opening it contacts
    no server."""
    settings = settings or get_settings()
    location = parse_location(settings.artifacts_url, settings.data_dir)
    part_size = settings.artifacts_part_mib << 20
    if location.kind == S3:
        try:
            import boto3  # noqa: F401
        except ImportError as exc:
            raise ArtifactStoreError(
                f"COOPLAB_ARTIFACTS_URL={location.url} needs boto3: pip install 'cooplab[s3]'"
            ) from exc
        from jobs.artifacts.backend_s3 import S3Backend

        env = s3_env or S3Env()
        backend = S3Backend(
            url=location.url,
            bucket=location.bucket or "",
            prefix=location.prefix,
            endpoint_url=env.aws_endpoint_url_s3 or env.aws_endpoint_url,
            region=env.aws_default_region or env.aws_region,
            access_key_id=env.aws_access_key_id,
            secret_access_key=env.aws_secret_access_key.get_secret_value()
            if env.aws_secret_access_key
            else None,
            session_token=env.aws_session_token.get_secret_value() if env.aws_session_token else None,
            part_size=part_size,
        )
    else:
        from jobs.artifacts.backend_fs import FolderBackend

        assert location.root is not None
        backend = FolderBackend(location.root, location.url, in_place=location.kind == LOCAL)
    signing_key = settings.artifacts_signing_key
    return ArtifactStore(
        backend,
        tries=settings.artifacts_tries,
        retry_base_s=settings.artifacts_retry_base_s,
        part_size=part_size,
        signing_key=signing_key.get_secret_value().encode() if signing_key else None,
    )


def check_store(settings: Settings | None = None) -> ArtifactStore:
    """Open the store and run its start-up check (``StoreRefused``/``StoreUnavailable``, one line each)."""
    settings = settings or get_settings()
    store = open_store(settings)
    store.check(create_bucket=settings.artifacts_create_bucket)
    return store
