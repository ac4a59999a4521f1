"""A store in an S3-compatible bucket (AWS S3, MinIO, SeaweedFS, Ceph) through boto3.

boto3's own retries are off: the store retries each operation with backoff and then names its URL
(:mod:`jobs.artifacts.retry`). Files go through boto3's transfer manager, in parts of ``part_size``
from that size on, so their ETags are the ones :mod:`jobs.artifacts.manifest` expects. Checksums
are sent only where the API requires them: every S3-compatible server takes that, and the store
checks each object's size and ETag itself.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from jobs.artifacts.backend import ObjectInfo
from jobs.artifacts.errors import StoreRefused, describe
from jobs.artifacts.location import join_key
from jobs.faults import exception_chain

CREDENTIAL_CODES = frozenset(
    {
        "SignatureDoesNotMatch",
        "InvalidAccessKeyId",
        "AccessDenied",
        "InvalidToken",
        "ExpiredToken",
        "AuthorizationHeaderMalformed",
        "403",
        "Forbidden",
        "InvalidSecurity",
        "AccessDeniedException",
    }
)
MISSING_BUCKET_CODES = frozenset({"NoSuchBucket"})
TRANSIENT_CODES = frozenset(
    {
        "SlowDown",
        "RequestTimeout",
        "InternalError",
        "ServiceUnavailable",
        "Throttling",
        "500",
        "502",
        "503",
        "504",
    }
)
_MISSING_KEY_CODES = frozenset({"NoSuchKey", "404", "NotFound"})
_DELETE_BATCH = 1000


class S3Backend:
    """Objects under ``s3://bucket/prefix``; ``endpoint_url`` None means AWS itself."""

    def __init__(
        self,
        *,
        url: str,
        bucket: str,
        prefix: str,
        endpoint_url: str | None,
        region: str | None,
        access_key_id: str | None,
        secret_access_key: str | None,
        session_token: str | None,
        part_size: int,
        concurrency: int = 4,
        connect_timeout_s: float = 5.0,
        read_timeout_s: float = 60.0,
    ) -> None:
        import boto3
        from boto3.s3.transfer import TransferConfig
        from botocore.config import Config

        self.url, self.bucket, self.prefix, self.endpoint_url = url, bucket, prefix, endpoint_url
        self.access_key_id = access_key_id
        session = boto3.session.Session(
            aws_access_key_id=access_key_id,
            aws_secret_access_key=secret_access_key,
            aws_session_token=session_token,
            region_name=region,
        )
        config = Config(
            retries={"total_max_attempts": 1, "mode": "standard"},
            connect_timeout=connect_timeout_s,
            read_timeout=read_timeout_s,
            max_pool_connections=max(10, concurrency * 2),
            s3={"addressing_style": "path" if endpoint_url else "auto"},
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        )
        self.client: Any = session.client("s3", endpoint_url=endpoint_url, config=config)
        self.transfer = TransferConfig(
            multipart_threshold=part_size,
            multipart_chunksize=part_size,
            max_concurrency=concurrency,
            use_threads=concurrency > 1,
            num_download_attempts=1,
        )

    @property
    def where(self) -> str:
        """The URL and, for a server other than AWS, its endpoint."""
        return f"{self.url} at {self.endpoint_url}" if self.endpoint_url else self.url

    def _key(self, key: str) -> str:
        return join_key(self.prefix, key)

    def _relative(self, object_key: str) -> str:
        return object_key[len(self.prefix) + 1 :] if self.prefix else object_key

    def put_file(self, local: Path, key: str) -> str | None:
        self.client.upload_file(str(local), self.bucket, self._key(key), Config=self.transfer)
        return None

    def put_bytes(self, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data)

    def get_bytes(self, key: str) -> bytes | None:
        try:
            return self.client.get_object(Bucket=self.bucket, Key=self._key(key))["Body"].read()
        except Exception as exc:
            if _code(exc) in _MISSING_KEY_CODES:
                return None
            raise

    def head(self, key: str) -> ObjectInfo | None:
        try:
            answer = self.client.head_object(Bucket=self.bucket, Key=self._key(key))
        except Exception as exc:
            if _code(exc) in _MISSING_KEY_CODES:
                return None
            raise
        return ObjectInfo(key, int(answer["ContentLength"]), answer.get("ETag"))

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=self._key(prefix)
        )
        for page in pages:
            for item in page.get("Contents", []):
                yield ObjectInfo(self._relative(item["Key"]), int(item["Size"]), item.get("ETag"))

    def download(self, key: str, dest: Path) -> None:
        self.client.download_file(self.bucket, self._key(key), str(dest), Config=self.transfer)

    def stream(self, key: str, chunk_size: int) -> Iterator[bytes]:
        body = self.client.get_object(Bucket=self.bucket, Key=self._key(key))["Body"]
        try:
            yield from body.iter_chunks(chunk_size)
        finally:
            body.close()

    def delete(self, keys: list[str]) -> None:
        for start in range(0, len(keys), _DELETE_BATCH):
            batch = [{"Key": self._key(k)} for k in keys[start : start + _DELETE_BATCH]]
            answer = self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True})
            errors = answer.get("Errors") or []
            if errors:
                first = errors[0]
                raise StoreRefused(
                    f"artifact store {self.where}: could not delete {len(errors)} objects, e.g. "
                    f"{first.get('Key')}: {first.get('Code')} {first.get('Message', '')}".rstrip()
                )

    def local_path(self, key: str) -> Path | None:
        return None

    def free_bytes(self) -> int | None:
        return None  # the S3 API reports no free space

    def check(self, *, create_bucket: bool) -> None:
        try:
            self.client.list_objects_v2(Bucket=self.bucket, MaxKeys=1)
        except Exception as exc:
            if _code(exc) in MISSING_BUCKET_CODES and create_bucket:
                self.client.create_bucket(Bucket=self.bucket)
            else:
                raise
        probe = self._key(f".probe/{os.uname().nodename}-{os.getpid()}")
        self.client.put_object(Bucket=self.bucket, Key=probe, Body=b"")
        self.client.delete_object(Bucket=self.bucket, Key=probe)

    def transient(self, exc: BaseException) -> bool:
        from botocore.exceptions import (
            ConnectionError as BotoConnectionError,
        )
        from botocore.exceptions import (
            HTTPClientError,
            IncompleteReadError,
            ReadTimeoutError,
            ResponseStreamingError,
        )
        from s3transfer.exceptions import RetriesExceededError

        kinds = (
            BotoConnectionError,
            HTTPClientError,
            ReadTimeoutError,
            ResponseStreamingError,
            IncompleteReadError,
            RetriesExceededError,
            ConnectionError,
            TimeoutError,
        )
        return any(isinstance(e, kinds) for e in exception_chain(exc)) or _code(exc) in TRANSIENT_CODES

    def refusal(self, exc: BaseException) -> Exception | None:
        code = _code(exc)
        if code in MISSING_BUCKET_CODES:
            return StoreRefused(
                f"artifact store {self.where}: the bucket {self.bucket} does not exist (create it, "
                "or set COOPLAB_ARTIFACTS_CREATE_BUCKET=true)"
            )
        if code in CREDENTIAL_CODES:
            return StoreRefused(
                f"artifact store {self.where} refused the credentials (AWS_ACCESS_KEY_ID="
                f"{self.access_key_id or '<from the AWS configuration>'}): {_message(exc)}"
            )
        return None


def _code(exc: BaseException) -> str | None:
    """The S3 error code of a ``ClientError`` anywhere in the chain (upload failures wrap it)."""
    for error in exception_chain(exc):
        response = getattr(error, "response", None)
        if isinstance(response, dict) and response.get("Error", {}).get("Code"):
            return str(response["Error"]["Code"])
    return None


def _message(exc: BaseException) -> str:
    for error in exception_chain(exc):
        response = getattr(error, "response", None)
        if isinstance(response, dict) and response.get("Error"):
            err = response["Error"]
            return f"{err.get('Code')} {err.get('Message', '')}".strip()
    return describe(exc)
