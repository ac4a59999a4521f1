"""Every change the dashboard makes to experiments, runs' notes, studies, evaluations and saved views, as plain
functions (no Streamlit) over a :class:`Store` and the settings.

Pages and components describe the UI, read through :mod:`app.queries`, and change state only through
these functions (run control, which goes through the job client, is :mod:`app.control`). Each function
is one action and raises what refused it for the page to word: the store's
:class:`~db.errors.DuplicateNameError` (a taken name) and :class:`~db.errors.RunActiveError` (a run
still active), the study layer's :class:`~jobs.study_space.StudySpaceError`, the evaluation queue's
errors. The job layer is imported when an action is taken, so pages that only read never load it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from app.study_form import promoted_config
from db.records import Experiment, Run
from db.store import Store
from db.study_records import Study

if TYPE_CHECKING:
    from db.evaluation_records import EvalRequest
    from jobs.eval_queue import EvalOptions
    from jobs.settings import Settings
    from jobs.study_spec import StudySpec


def split_tags(text: str) -> list[str]:
    """``"a, b,,c "`` → ``["a", "b", "c"]``: tags as typed into one comma-separated field."""
    return [tag.strip() for tag in str(text or "").split(",") if tag.strip()]


# ---- experiments


def create_experiment(store: Store, config: Mapping[str, Any]) -> Experiment:
    """A new experiment holding ``config`` (named, described and tagged as the config says)."""
    return store.create_experiment(str(config.get("name") or ""), description=str(config.get("description") or ""),
                                   tags=list(config.get("tags") or []), config=config)


def save_experiment(store: Store, experiment_id: int | None, config: Mapping[str, Any], *,
                    if_saved_at: datetime | None = None) -> Experiment:
    """Store the editor's valid ``config``: a new experiment (``experiment_id`` None) or the open one;
    with ``if_saved_at`` (the version the edit started from) only if nobody saved it since, else
    :class:`db.errors.StaleEditError`."""
    if experiment_id is None:
        return create_experiment(store, config)
    return store.update_experiment(experiment_id, name=config["name"], description=config["description"],
                                   tags=config["tags"], config=config, if_saved_at=if_saved_at)


def clone_experiment(store: Store, experiment_id: int, name: str) -> Experiment:
    """A copy of the experiment (config, description, tags) under ``name``, without its runs."""
    return store.clone_experiment(experiment_id, name)


def delete_experiment(store: Store, experiment_id: int) -> None:
    """Delete the experiment with all its runs (refused while one of them is active)."""
    store.delete_experiment(experiment_id)


def set_experiment_config(store: Store, experiment_id: int, config: Mapping[str, Any]) -> Experiment:
    """Replace the experiment's config, its name, description and tags unchanged (runs already made
    keep the config they ran with)."""
    return store.update_experiment(experiment_id, config=config)


def promote_point(store: Store, study: Study, point: int, params: Mapping[str, Any]) -> Experiment:
    """The experiment ``<study>: point <n>``: the study's base config with the point's values. Made on
    the first promotion; promoting the same point again opens the one made before."""
    name = f"{study.name}: point {point}"
    found = store.find_experiment(name)
    if found is not None:
        return found
    config = promoted_config(dict(study.spec.get("base") or {}), params, name=name)
    return store.create_experiment(name, description=f"best point of study {study.name!r}", tags=["promoted"],
                                   config=config)


# ---- runs


def set_run_notes(store: Store, run_id: int, *, tags: str, notes: str) -> Run:
    """Replace a run's tags (one comma-separated field) and notes."""
    return store.set_run_notes(run_id, tags=split_tags(tags), notes=notes)


def rename_run(store: Store, run_id: int, name: str) -> Run:
    """Give a run a display name (an empty one removes it); ValueError says what is wrong with it."""
    return store.rename_run(run_id, name)


def delete_run(store: Store, run_id: int) -> None:
    """Delete a run with its metrics and transcripts (files on disk stay; refused while it is active)."""
    store.delete_run(run_id)


# ---- saved views (what a user chose to see; ``app.saved_views`` decides when)


def save_view(store: Store, owner: str, view: str, scope: str, choice: Mapping[str, Any]) -> None:
    """Keep ``owner``'s ``choice`` for ``view`` in ``scope``; ValueError when the store refuses it (too long)."""
    store.save_view(owner, view, scope, choice)


def forget_view(store: Store, owner: str, view: str, scope: str) -> None:
    """Drop ``owner``'s saved ``view`` in ``scope``: the page's defaults again."""
    store.forget_view(owner, view, scope)


def queue_evaluation(run_id: int, *, checkpoint: str, options: EvalOptions, settings: Settings) -> EvalRequest:
    """Send an evaluation of the run's ``checkpoint`` to its workers; returns the queued request."""
    from jobs.eval_queue import queue_evaluation as queue

    return queue(run_id, checkpoint=checkpoint, options=options, settings=settings)


def fail_lost_evaluations(store: Store, *, settings: Settings) -> list[int]:
    """Fail the running evaluation requests whose job stopped sending heartbeats (its worker died or
    hung); returns their ids. A page watching evaluations settles them, as the workers would."""
    from db.eval_request_store import EvalRequestStore

    return EvalRequestStore(store).reap_stale(settings.heartbeat_timeout_s)


# ---- studies


def queue_study(spec: StudySpec, *, settings: Settings) -> Study:
    """Store the study with its children and queue the first of them (every config checked first)."""
    from jobs.studies import create_study

    return create_study(spec, settings=settings)


def drive_study(study_id: int, *, settings: Settings, store: Store) -> None:
    """One scheduling pass of an active study (a page watching it also drives it)."""
    from jobs.studies import schedule_study

    schedule_study(study_id, settings=settings, store=store)


def stop_study(study_id: int, *, settings: Settings) -> int:
    """Stop all: cancel the waiting children and stop the running ones; returns how many were asked."""
    from jobs.studies import stop_study as stop

    return stop(study_id, settings=settings)


def resume_study(study_id: int, *, settings: Settings) -> int:
    """Resume all: children that ended stopped, cancelled or lost wait again; returns how many."""
    from jobs.studies import resume_study as resume

    return resume(study_id, settings=settings)
