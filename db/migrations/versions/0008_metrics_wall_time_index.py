"""An index on the metrics' wall time: ``ix_metrics_run_key_wall (run_id, key, wall_time, value, step)``.

A series along the wall-time axis reads each bucket's smallest and largest value with one index range
seek per bucket, as the step axis does on ``ix_metrics_run_key_step``, instead of grouping every point
of the key after a table lookup each (``value`` and ``step`` are in it so these reads, and a step range
on the wall-time axis, never touch the table).

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_metrics_run_key_wall", "metrics", ["run_id", "key", "wall_time", "value", "step"])


def downgrade() -> None:
    op.drop_index("ix_metrics_run_key_wall", table_name="metrics")
