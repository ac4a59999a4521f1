"""The artifact store's errors: each ``str()`` is one line naming the store's URL and the cause."""

from __future__ import annotations


class ArtifactStoreError(Exception):
    """Base class: something about the artifact store an operator must act on."""


class StoreUnavailable(ArtifactStoreError):
    """The store did not answer (connection refused, reset, timed out, 5xx) after every try."""

    def __init__(self, url: str, action: str, tries: int, cause: BaseException) -> None:
        self.url, self.action, self.tries, self.cause = url, action, tries, cause
        super().__init__(f"artifact store {url} failed {action} after {tries} tries: {describe(cause)}")


class StoreRefused(ArtifactStoreError):
    """The store answered but refused: wrong credentials, a missing bucket, no permission."""


class NotComplete(ArtifactStoreError):
    """A folder has no completion marker: it was never completely uploaded (or is being deleted)."""


class VerificationFailed(ArtifactStoreError):
    """Stored objects (or downloaded files) differ from the folder's manifest in size or checksum."""

    def __init__(self, url: str, key: str, problems: list[str]) -> None:
        self.url, self.key, self.problems = url, key, problems
        shown = "; ".join(problems[:3]) + (f"; and {len(problems) - 3} more" if len(problems) > 3 else "")
        super().__init__(f"artifact store {url}: {key} failed its check: {shown}")


class TamperedMarker(ArtifactStoreError):
    """A completion marker is not one the store writes (a path out of its folder, a forged size, another
    folder's key, a wrong signature): nothing it lists is downloaded, written or deleted."""

    def __init__(self, url: str, marker: str, problem: str) -> None:
        self.url, self.marker, self.problem = url, marker, problem
        super().__init__(
            f"artifact store {url}: the completion marker {marker} was refused: {problem}; nothing it lists "
            "was downloaded, written or deleted. Someone with write access to the store wrote it: check the "
            "store's access, then delete that folder from the store (its checkpoint is not usable)")


class CacheFull(ArtifactStoreError):
    """Not enough local space to download a folder; nothing of it was left behind."""


def describe(exc: BaseException) -> str:
    """``Type: message`` on one line."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
