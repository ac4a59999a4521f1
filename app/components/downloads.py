"""On-demand file contents for download buttons (built only when the user clicks)."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path


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
