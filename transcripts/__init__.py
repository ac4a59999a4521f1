"""The transcript of a rollout: one :class:`TurnRecord` per agent and turn, grouped into an :class:`Episode`.

One type end to end: the engine builds these and reports them through its sink, the job's database
sink hands them to ``db.store.Store.log_step`` unchanged, and the store's readers return the stored
turns as the same :class:`TurnRecord` (inside ``db.records.EpisodeView``). This package imports
nothing of the others and no third-party library, so every layer (engine, db, jobs, app) may use it.
"""

from transcripts.episode import Episode, TurnRecord

__all__ = ["Episode", "TurnRecord"]
