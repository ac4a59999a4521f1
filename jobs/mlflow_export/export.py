"""Export CoopLab runs to an MLflow tracking server with the ``mlflow`` client.

Each run becomes one MLflow run in the experiment of the same name (or the one asked for): params
from its config, every metric point with its step and time, tags
(:func:`~jobs.mlflow_export.mapping.run_tags`) and artifacts: the run config, the metrics CSV, the
transcripts JSONL, the evaluation records JSONL and the final model folders (``model``,
``model_best``) where the run's folder is on this machine. A run exported before (same database id
and run id, found by its tags) is skipped unless ``again``.

Artifacts go only through the tracking server's own artifact API (:mod:`jobs.mlflow_export.artifacts`),
never through the client's ``log_artifact``, which writes wherever the server's ``artifact_uri`` says
(a ``file://`` location is a folder on this machine). The experiment's artifact location is checked
before a run is made, and the new run's before anything is logged to it.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from db.evaluation_store import EvaluationStore
from db.records import Run
from db.store import Store
from db.study_store import StudyStore
from jobs.mlflow_export.artifacts import ArtifactLocationError, ServerArtifacts, artifact_folder
from jobs.mlflow_export.mapping import (
    TAG_PREFIX,
    clean_key,
    config_seed,
    flatten_params,
    mlflow_status,
    run_tags,
)

_METRIC_BATCH = 1000
_PARAM_BATCH = 100
MODEL_FOLDERS = ("model", "model_best")


@dataclass(frozen=True)
class Exported:
    """One run's export: the MLflow run (new, or the earlier one when ``skipped``) and what was logged."""

    run_id: int
    mlflow_run_id: str
    experiment: str
    experiment_id: str
    params: int
    metric_points: int
    artifacts: tuple[str, ...]
    skipped: bool = False


def _ms(moment: datetime | None) -> int | None:
    return None if moment is None else int(moment.timestamp() * 1000)


def _study(store: Store, lineage: tuple[int, ...]) -> dict[str, Any] | None:
    """The study point of a run: the trial of any attempt of its lineage (a resumed child's first run)."""
    studies = StudyStore(store)
    trial = next((t for t in map(studies.trial_of_run, lineage) if t is not None), None)
    if trial is None:
        return None
    return {
        "name": studies.get_study(trial.study_id).name,
        "point": trial.point,
        "seed_index": trial.seed_index,
        "seed": trial.seed,
        "params": trial.params,
    }


def _experiment(client: Any, name: str) -> Any:
    found = client.get_experiment_by_name(name)
    return found if found is not None else client.get_experiment(client.create_experiment(name))


def _forget(client: Any, mlflow_id: str) -> None:
    """Delete a run just made (so it is not found later as exported); a failure leaves it."""
    from mlflow.exceptions import MlflowException

    with contextlib.suppress(MlflowException):
        client.delete_run(mlflow_id)


def _earlier(client: Any, experiment_id: str, tags: dict[str, str]) -> str | None:
    query = (
        f"tags.`{TAG_PREFIX}run_id` = '{tags[TAG_PREFIX + 'run_id']}' and "
        f"tags.`{TAG_PREFIX}database_id` = '{tags[TAG_PREFIX + 'database_id']}'"
    )
    runs = client.search_runs([experiment_id], filter_string=query, max_results=1)
    return runs[0].info.run_id if runs else None


def _metric_batches(store: Store, run_id: int) -> Iterator[list[Any]]:
    from mlflow.entities import Metric

    batch: list[Any] = []
    for point in store.iter_metrics(run_id):
        batch.append(Metric(clean_key(point.key), point.value, int(point.wall_time * 1000), point.step))
        if len(batch) == _METRIC_BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def _write_text(path: Path, chunks: Iterator[str]) -> Path:
    with path.open("w", encoding="utf-8") as out:
        for chunk in chunks:
            out.write(chunk)
    return path


def _record_files(store: Store, run: Run, folder: Path) -> list[Path]:
    """The run's config, metrics CSV, transcripts JSONL and evaluation records JSONL as files."""
    config = folder / "config.json"
    config.write_text(json.dumps(dict(run.config), indent=1, sort_keys=True, default=str), encoding="utf-8")
    files = [config, _write_text(folder / "metrics.csv", store.stream_metrics_csv(run.id))]
    transcripts = _write_text(folder / "transcripts.jsonl", store.stream_episodes_jsonl(run.id))
    records = EvaluationStore(store).list_evaluations(run.id)
    evaluations = _write_text(
        folder / "evaluations.jsonl",
        (json.dumps(asdict(r), default=str, sort_keys=True) + "\n" for r in records),
    )
    files += [f for f in (transcripts, evaluations) if f.stat().st_size]
    return files


def model_folders(output_dir: str | None) -> list[Path]:
    """The run's final model folders on this machine (``model``, ``model_best``) that exist."""
    if not output_dir:
        return []
    return [Path(output_dir) / name for name in MODEL_FOLDERS if (Path(output_dir) / name).is_dir()]


def export_run(
    store: Store, run_id: int, client: Any, *, experiment: str | None = None, again: bool = False
) -> Exported:
    """Export run ``run_id`` of ``store`` through the MLflow ``client`` (an ``MlflowClient`` of an
    ``http(s)://`` tracking server); :class:`~jobs.mlflow_export.artifacts.ArtifactLocationError` when
    the server keeps the experiment's or the new run's artifacts anywhere but its artifact API."""
    from mlflow.entities import Param

    run = store.get_run(run_id)
    experiment_name = experiment or store.get_experiment(run.experiment_id).name
    lineage = store.lineage(run.id).run_ids
    tags = run_tags(
        run_id=run.id,
        database_id=store.database_id(),
        experiment=experiment_name,
        status=run.status,
        attempt=run.attempt,
        lineage=lineage,
        resumed_from=run.resumed_from,
        seed=config_seed(run.config),
        worker=run.worker,
        tags=run.tags,
        study=_study(store, lineage),
    )
    found = _experiment(client, experiment_name)
    experiment_id = found.experiment_id
    earlier = None if again else _earlier(client, experiment_id, tags)
    if earlier is not None:
        return Exported(run.id, earlier, experiment_name, experiment_id, 0, 0, (), skipped=True)

    artifact_folder(client.tracking_uri, found.artifact_location, f"experiment '{experiment_name}'")
    name = f"{run.config.get('name') or experiment_name} #{run.id}"
    mlrun = client.create_run(
        experiment_id, start_time=_ms(run.started_at or run.created_at), tags=tags, run_name=name
    )
    mlflow_id = mlrun.info.run_id
    try:
        on_server = artifact_folder(client.tracking_uri, mlrun.info.artifact_uri, "the new MLflow run")
    except ArtifactLocationError:
        _forget(client, mlflow_id)
        raise
    artifacts = ServerArtifacts(client.tracking_uri, on_server)
    params = flatten_params(run.config)
    items = [Param(k, v) for k, v in params.items()]
    for start in range(0, len(items), _PARAM_BATCH):
        client.log_batch(mlflow_id, params=items[start : start + _PARAM_BATCH])
    points = 0
    for batch in _metric_batches(store, run.id):
        client.log_batch(mlflow_id, metrics=batch)
        points += len(batch)
    logged: list[str] = []
    with tempfile.TemporaryDirectory(prefix="cooplab-mlflow-") as tmp:
        for path in _record_files(store, run, Path(tmp)):
            artifacts.put_file(path)
            logged.append(path.name)
    for folder in model_folders(run.output_dir):
        artifacts.put_folder(folder, folder.name)
        logged.append(f"{folder.name}/")
    status = mlflow_status(run.status)
    if status is not None:
        client.set_terminated(mlflow_id, status=status, end_time=_ms(run.finished_at))
    return Exported(run.id, mlflow_id, experiment_name, experiment_id, len(params), points, tuple(logged))
