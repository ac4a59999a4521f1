"""Trainer configuration: CoMLRL's ``MAGRPOConfig`` field names and defaults, plus CoopLab's extras.

The settings come from :mod:`engine.schema.catalog` (each declared once, with its bounds, description
and the algorithms that read it); a class has the settings its algorithm reads. CoMLRL 1.4.3's fields
come first, in its order and with its defaults (``COMLRL_ORDER``), so a CoMLRL script's
``MAGRPOConfig(...)`` call works unchanged; what CoMLRL lacks (clipping, schedules, seeds, checkpoints,
reporting) follows. Values are validated on construction and on assignment, and an invalid value
raises :class:`ValueError` whose message starts with the field name. ``advantage_mode=None`` means the
algorithm's baseline.

Two deliberate departures from CoMLRL's defaults:

* ``early_termination_threshold`` defaults to ``None`` (off). CoMLRL's ``-0.2`` stops expanding a
  branch once the node's mean reward is *above* -0.2, which only means "nearly solved" for tasks
  whose rewards are shifted to be <= 0 (its code task shifts by -4). With ordinary non-negative
  rewards every branch would stop after turn 1 and multi-turn training would silently become
  single-turn. Set it explicitly when your reward scale makes it meaningful.
* ``discount`` is honoured: returns are ``r_t + discount * mean(child returns)`` (CoMLRL 1.4.3
  ignores it and always sums undiscounted).
"""

from __future__ import annotations

from engine.schema.derive import config_class, subclass

MAGRPOConfig = config_class(
    "MAGRPOConfig", "magrpo", module=__name__,
    doc="Settings of a :class:`engine.trainer.MAGRPOTrainer` run (CoMLRL 1.4.3's names and defaults first).",
)
MAREINFORCEConfig = subclass(
    MAGRPOConfig, "MAREINFORCEConfig", "mareinforce", module=__name__, forced_advantage_mode="raw",
    doc="MAGRPO with no baseline (``advantage_mode='raw'``), as CoMLRL's MAREINFORCE.",
)
MAReMaxConfig = subclass(
    MAGRPOConfig, "MAReMaxConfig", "maremax", module=__name__, forced_advantage_mode="max",
    doc="MAGRPO with the group maximum as baseline (``advantage_mode='max'``), as CoMLRL's MAReMax.",
)
MARLOOConfig = subclass(
    MAGRPOConfig, "MARLOOConfig", "marloo", module=__name__, forced_advantage_mode="rloo",
    doc="MAGRPO with the leave-one-out baseline (``advantage_mode='rloo'``), as CoMLRL's MARLOO.",
)
