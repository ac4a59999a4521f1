"""Evaluation requests: ``eval_requests`` (an evaluation of a run queued on the workers, its options and
its state: queued, running, done with the evaluation records it stored, or failed with a reason).

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table("eval_requests",
    sa.Column("id", sa.Integer(), nullable=False),
    sa.Column("run_id", sa.Integer(), nullable=False),
    sa.Column("status", sa.String(length=20), nullable=False),
    sa.Column("checkpoint", sa.String(length=40), nullable=False),
    sa.Column("options", sa.JSON(), nullable=False),
    sa.Column("queue", sa.String(length=100), nullable=False),
    sa.Column("celery_task_id", sa.String(length=200), nullable=True),
    sa.Column("worker", sa.String(length=200), nullable=True),
    sa.Column("error", sa.Text(), nullable=True),
    sa.Column("evaluation_ids", sa.JSON(), nullable=False),
    sa.Column("created_at", sa.DateTime(), nullable=False),
    sa.Column("started_at", sa.DateTime(), nullable=True),
    sa.Column("finished_at", sa.DateTime(), nullable=True),
    sa.Column("heartbeat_at", sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="CASCADE"),
    sa.PrimaryKeyConstraint("id")
    )
    op.create_index("ix_eval_requests_run_id", "eval_requests", ["run_id"])
    op.create_index("ix_eval_requests_status", "eval_requests", ["status"])


def downgrade() -> None:
    op.drop_index("ix_eval_requests_status", table_name="eval_requests")
    op.drop_index("ix_eval_requests_run_id", table_name="eval_requests")
    op.drop_table("eval_requests")
