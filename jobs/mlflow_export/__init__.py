"""``cooplab export mlflow``: CoopLab runs (params, metrics, tags, artifacts) into an MLflow tracking
server."""

from __future__ import annotations

from jobs.mlflow_export.export import Exported, export_run, model_folders

__all__ = ["Exported", "export_run", "model_folders"]
