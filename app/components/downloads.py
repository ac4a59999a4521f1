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
