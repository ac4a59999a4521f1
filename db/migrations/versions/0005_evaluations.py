"""Evaluations of record: ``evaluations`` (a run's team evaluated at a checkpoint on a split, with its
settings, metrics, standard errors, per-item outcomes and evaluated episodes; team analyses as one row
per variant sharing ``analysis``).

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table("evaluations",
    sa.Column("id", sa.Integer(), nullable=False),
    sa.Column("run_id", sa.Integer(), nullable=False),
    sa.Column("kind", sa.String(length=20), nullable=False),
    sa.Column("label", sa.String(length=200), nullable=False),
    sa.Column("analysis", sa.String(length=36), nullable=True),
    sa.Column("checkpoint_step", sa.Integer(), nullable=True),
    sa.Column("checkpoint_path", sa.Text(), nullable=True),
    sa.Column("split", sa.String(length=20), nullable=False),
    sa.Column("settings", sa.JSON(), nullable=False),
    sa.Column("metrics", sa.JSON(), nullable=False),
    sa.Column("standard_errors", sa.JSON(), nullable=False),
    sa.Column("per_item", sa.JSON(), nullable=False),
    sa.Column("episodes", sa.JSON(), nullable=False),
    sa.Column("created_at", sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="CASCADE"),
    sa.PrimaryKeyConstraint("id")
    )
    op.create_index("ix_evaluations_run_step", "evaluations", ["run_id", "checkpoint_step"])


def downgrade() -> None:
    op.drop_index("ix_evaluations_run_step", table_name="evaluations")
    op.drop_table("evaluations")
