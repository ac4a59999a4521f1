"""Studies: ``studies`` (a base config, a search space, seeds per point, a concurrency cap) and
``study_trials`` (one row per point and seed, linked to the run executing it).

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table("studies",
    sa.Column("id", sa.Integer(), nullable=False),
    sa.Column("name", sa.String(length=200), nullable=False),
    sa.Column("description", sa.Text(), nullable=False),
    sa.Column("experiment_id", sa.Integer(), nullable=False),
    sa.Column("spec", sa.JSON(), nullable=False),
    sa.Column("status", sa.String(length=20), nullable=False),
    sa.Column("queue", sa.String(length=100), nullable=False),
    sa.Column("max_concurrent", sa.Integer(), nullable=False),
    sa.Column("created_at", sa.DateTime(), nullable=False),
    sa.Column("updated_at", sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(["experiment_id"], ["experiments.id"], ondelete="CASCADE"),
    sa.PrimaryKeyConstraint("id"),
    sa.UniqueConstraint("name")
    )
    op.create_index("ix_studies_experiment_id", "studies", ["experiment_id"])
    op.create_index("ix_studies_status", "studies", ["status"])
    op.create_table("study_trials",
    sa.Column("id", sa.Integer(), nullable=False),
    sa.Column("study_id", sa.Integer(), nullable=False),
    sa.Column("point", sa.Integer(), nullable=False),
    sa.Column("seed_index", sa.Integer(), nullable=False),
    sa.Column("seed", sa.Integer(), nullable=False),
    sa.Column("params", sa.JSON(), nullable=False),
    sa.Column("config", sa.JSON(), nullable=False),
    sa.Column("run_id", sa.Integer(), nullable=True),
    sa.Column("previous_run_ids", sa.JSON(), nullable=False),
    sa.Column("stop_reason", sa.Text(), nullable=True),
    sa.ForeignKeyConstraint(["study_id"], ["studies.id"], ondelete="CASCADE"),
    sa.ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="SET NULL"),
    sa.PrimaryKeyConstraint("id"),
    sa.UniqueConstraint("study_id", "point", "seed_index", name="uq_study_trials_point_seed")
    )
    op.create_index("ix_study_trials_study_id", "study_trials", ["study_id"])
    op.create_index("ix_study_trials_run_id", "study_trials", ["run_id"])


def downgrade() -> None:
    op.drop_table("study_trials")
    op.drop_table("studies")
