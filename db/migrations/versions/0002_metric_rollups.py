"""Metric rollups: per run, key and power-of-two block of steps, the count and the extremes.

Creates ``metric_rollups`` and fills it from the points already stored, at every level of
``db.rollups.LEVELS`` (the levels are written out here so this script never changes with the code).

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LEVELS = (4, 8, 12)

# Per block: count, min and max in one grouped pass; then the earliest step holding each extreme,
# found by an index range seek on metrics (run_id, key, step, value) inside the block.
_BACKFILL = """
INSERT INTO metric_rollups (run_id, key, level, bucket, count, min_value, min_step, max_value, max_step)
SELECT g.run_id, g.key, {level}, g.bucket, g.n, g.lo,
  (SELECT MIN(m.step) FROM metrics m WHERE m.run_id = g.run_id AND m.key = g.key
     AND m.step >= g.bucket * {size} AND m.step < (g.bucket + 1) * {size} AND m.value = g.lo),
  g.hi,
  (SELECT MIN(m.step) FROM metrics m WHERE m.run_id = g.run_id AND m.key = g.key
     AND m.step >= g.bucket * {size} AND m.step < (g.bucket + 1) * {size} AND m.value = g.hi)
FROM (SELECT run_id, key, step >> {level} AS bucket, COUNT(*) AS n, MIN(value) AS lo, MAX(value) AS hi
      FROM metrics WHERE value IS NOT NULL GROUP BY run_id, key, step >> {level}) AS g
"""


def upgrade() -> None:
    op.create_table("metric_rollups",
    sa.Column("run_id", sa.Integer(), nullable=False),
    sa.Column("key", sa.String(length=200), nullable=False),
    sa.Column("level", sa.Integer(), nullable=False),
    sa.Column("bucket", sa.Integer(), nullable=False),
    sa.Column("count", sa.Integer(), nullable=False),
    sa.Column("min_value", sa.Float(), nullable=False),
    sa.Column("min_step", sa.Integer(), nullable=False),
    sa.Column("max_value", sa.Float(), nullable=False),
    sa.Column("max_step", sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="CASCADE"),
    sa.PrimaryKeyConstraint("run_id", "key", "level", "bucket")
    )
    for level in LEVELS:
        op.execute(_BACKFILL.format(level=int(level), size=1 << int(level)))


def downgrade() -> None:
    op.drop_table("metric_rollups")
