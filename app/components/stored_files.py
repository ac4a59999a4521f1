"""A run's checkpoints, exported models and log as downloads, from this machine or from the artifact
store (``app/run_files.py`` finds them and checks what it sends), and the store's line on the Workers
page.

The page asks the store only for what is not on this machine, with quick tries; a store that does not
answer is one warning naming its URL, and the entries it holds are not offered until it answers.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import streamlit as st

from app import context
from app.components.downloads import exported_models, file_chunks, offer, zip_folder
from app.escape import md_code, md_message
from app.queries import LOG_LINES, read_log
from app.run_files import (
    OUTAGES,
    StoreLine,
    checkpoint_place,
    fetch_folder,
    fetch_log,
    is_local,
    open_artifacts,
    shown_where,
    stored_exports,
    stored_log,
    stream_checked,
)
from db.records import Checkpoint, Run
from jobs.artifacts import LOCAL, ArtifactStore, ArtifactStoreError, parse_location
from jobs.settings import Settings


def _store_zip(settings: Settings, key: str) -> Iterator[bytes]:
    """A download's producer: the folder fetched from the store (checked) into this machine's cache,
    then zipped while it is sent. The fetch happens when the download starts, so a store that is down
    answers with its one-line reason before any byte is sent."""
    return zip_folder(fetch_folder(open_artifacts(settings), key, settings.artifacts_cache_dir))


def _uses_store(settings: Settings) -> bool:
    """False when the store is this machine's data directory (nothing there the disk does not hold)."""
    try:
        return parse_location(settings.artifacts_url, settings.data_dir).kind != LOCAL
    except ValueError:
        return True  # a bad URL: opening it names the problem


class _PageStore:
    """The store as one page draw asks it: opened on first need, and asked no more after it failed once
    (its one-line reason is shown once)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._store: ArtifactStore | None = None
        self.problem: str | None = None

    def get(self) -> ArtifactStore | None:
        if self._store is None and self.problem is None:
            try:
                self._store = open_artifacts(self.settings, for_page=True)
            except ArtifactStoreError as exc:
                self.problem = str(exc)
            else:
                self.problem = OUTAGES.recent(shown_where(self._store))
        return None if self.problem else self._store

    def failed(self, exc: ArtifactStoreError) -> None:
        self.problem = str(exc)
        if self._store is not None:
            OUTAGES.failed(shown_where(self._store), self.problem)

    def warn(self, what: str) -> None:
        if self.problem:
            st.warning(f"{what} could not be read from the artifact store: {md_message(self.problem)}")


def render_checkpoints(run: Run, checkpoints: list[Checkpoint]) -> None:
    """One line per checkpoint with its zip: the folder on this machine, else its checked copy in the
    artifact store (downloaded into this machine's cache first, then zipped)."""
    settings = context.settings()
    page = _PageStore(settings)
    for ckpt in checkpoints:
        c1, c2 = st.columns([3, 1])
        c1.markdown(f"step **{ckpt.step}** · {md_code(ckpt.path)} · {ckpt.created_at:%Y-%m-%d %H:%M:%S}")
        store = page.get() if ckpt.artifact_url and not Path(ckpt.path).exists() else None
        place = checkpoint_place(ckpt, store.url if store is not None else "")
        with c2:
            if place.local is not None:
                offer("zip", lambda p=place.local: zip_folder(p), file_name=f"run{run.id}-step{ckpt.step}.zip",
                      mime="application/zip", key=f"ckpt.{ckpt.id}")
            elif store is not None and place.key is not None:
                try:
                    whole = store.manifest(place.key) is not None
                except ArtifactStoreError as exc:
                    page.failed(exc)
                    st.caption("artifact store not answering")
                    continue
                if whole:
                    offer("zip", lambda k=place.key: _store_zip(settings, k),
                          file_name=f"run{run.id}-step{ckpt.step}.zip", mime="application/zip", key=f"ckpt.{ckpt.id}",
                          help=f"From the artifact store {shown_where(store)}: downloaded to this machine's cache, "
                               "every file checked, then zipped.")
                    st.caption("from the artifact store")
                else:
                    st.caption("not complete in the artifact store")
            elif page.problem and ckpt.artifact_url:
                st.caption("artifact store not answering")
            else:
                st.caption(md_message(place.problem or "folder not on this machine"))
    page.warn("Checkpoints")


def render_exported_models(run: Run) -> None:
    """The run's exported Hugging Face model folders (``<output_dir>/model``) to download as zips: those
    on this machine, else the ones the run uploaded to the artifact store."""
    exported = exported_models(run.output_dir)
    for folder in exported:
        c1, c2 = st.columns([3, 1])
        c1.markdown(f"{md_code(folder)}: load it with `AutoModelForCausalLM.from_pretrained(path)` or use the path "
                    "as an agent's model source")
        with c2:
            offer("zip", lambda p=folder: zip_folder(p), file_name=f"run{run.id}-{Path(folder).name}.zip",
                  mime="application/zip", key=f"model.{folder}")
    if exported:
        return
    settings = context.settings()
    stored = []
    if _uses_store(settings):
        page = _PageStore(settings)
        store = page.get()
        try:
            stored = stored_exports(store, run.id) if store is not None else []
        except ArtifactStoreError as exc:
            page.failed(exc)
        page.warn("Exported models")
    if not stored:
        st.caption("A run that completes exports each agent as a Hugging Face model folder "
                   "(`<output_dir>/model`); none yet.")
        return
    for manifest in stored:
        name = manifest.key.split("/exports/", 1)[-1]
        c1, c2 = st.columns([3, 1])
        c1.markdown(f"{md_code(name)} in the artifact store ({md_code(manifest.key)}, from {md_code(manifest.host)}): "
                    "download it, unzip it, and load the folder with `AutoModelForCausalLM.from_pretrained(path)`")
        with c2:
            offer("zip", lambda k=manifest.key: _store_zip(settings, k),
                  file_name=f"run{run.id}-{name.replace('/', '-')}.zip", mime="application/zip",
                  key=f"model.store.{manifest.key}")


def render_stored_log(run: Run) -> None:
    """The run's log from the artifact store, when its file is not on this machine: the tail, from a
    checked copy in this machine's cache, and the whole log streamed from the store (checked)."""
    settings = context.settings()
    if not _uses_store(settings):
        st.caption(f"The log file {md_code(run.log_path)} is not on this machine. With COOPLAB_ARTIFACTS_URL set, "
                   "runs upload their log to the artifact store when they end, and it is shown here.")
        return
    page = _PageStore(settings)
    store = page.get()
    if store is None:
        page.warn("The log")
        return
    try:
        log = stored_log(store, run.id)
        path = fetch_log(store, log, settings.artifacts_cache_dir) if log is not None else None
    except ArtifactStoreError as exc:
        page.failed(exc)
        page.warn("The log")
        return
    if log is None or path is None:
        st.caption(f"The log file is not on this machine, and the artifact store {md_code(shown_where(store))} "
                   "holds no log of this run (runs upload their log when they end).")
        return
    tail = read_log(str(path), lines=LOG_LINES)
    note = f"the last {tail.shown:,} lines" if tail.truncated else f"all {tail.shown:,} lines"
    st.caption(f"From the artifact store ({md_code(log.key)} in {md_code(shown_where(store))}, uploaded by "
               f"{md_code(log.folder.host)}) · {log.size / 1024:,.1f} KiB · showing {note}")
    st.code(tail.text, language="text", height=480)
    offer("whole log", lambda: stream_checked(open_artifacts(settings), log), file_name=f"run{run.id}.log",
          mime="text/plain", key=f"dl_log_{run.id}")


def local_log_offer(run: Run) -> bool:
    """The whole log from this machine's disk, when it is here; False when it is not."""
    if run.log_path and Path(run.log_path).is_file():
        offer("whole log", lambda: file_chunks(run.log_path), file_name=f"run{run.id}.log", mime="text/plain",
              key=f"dl_log_{run.id}")
        return True
    return False


def render_store_line(line: StoreLine) -> None:
    """The artifact store as this dashboard reaches it: URL (without credentials) and free space, or why
    it does not answer."""
    if is_local(line):
        st.markdown(f"This machine's data directory {md_code(line.where)} · {line.free_text()}")
        st.caption("COOPLAB_ARTIFACTS_URL is unset: checkpoints, models and logs stay on the machine that wrote "
                   "them. Set it to `s3://bucket/prefix` or `file:///mnt/shared/...` on every worker and the "
                   "dashboard to resume runs and download their files anywhere.")
    else:
        st.markdown(f"{md_code(line.where)} · {line.free_text()}")
    if line.problem:
        st.warning(f"The artifact store does not answer: {md_message(line.problem)}")
