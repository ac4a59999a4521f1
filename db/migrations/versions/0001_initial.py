"""Initial schema: experiments, runs, metrics, episodes, turns, checkpoints, workers.

Revision ID: 0001
Revises: (none)
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table("experiments",
    sa.Column("id", sa.Integer(), nullable=False),
    sa.Column("name", sa.String(length=200), nullable=False),
    sa.Column("description", sa.Text(), nullable=False),
    sa.Column("tags", sa.JSON(), nullable=False),
    sa.Column("config", sa.JSON(), nullable=False),
    sa.Column("created_at", sa.DateTime(), nullable=False),
    sa.Column("updated_at", sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint("id"),
    sa.UniqueConstraint("name")
    )
    op.create_table("runs",
    sa.Column("id", sa.Integer(), nullable=False),
    sa.Column("experiment_id", sa.Integer(), nullable=False),
    sa.Column("attempt", sa.Integer(), nullable=False),
    sa.Column("status", sa.String(length=20), nullable=False),
    sa.Column("config", sa.JSON(), nullable=False),
    sa.Column("queue", sa.String(length=100), nullable=False),
    sa.Column("device", sa.String(length=100), nullable=True),
    sa.Column("celery_task_id", sa.String(length=200), nullable=True),
    sa.Column("worker", sa.String(length=200), nullable=True),
    sa.Column("created_at", sa.DateTime(), nullable=False),
    sa.Column("started_at", sa.DateTime(), nullable=True),
    sa.Column("finished_at", sa.DateTime(), nullable=True),
    sa.Column("heartbeat_at", sa.DateTime(), nullable=True),
    sa.Column("step", sa.Integer(), nullable=False),
    sa.Column("env_step", sa.BigInteger(), nullable=False),
    sa.Column("total_steps", sa.Integer(), nullable=True),
    sa.Column("first_step", sa.Integer(), nullable=True),
    sa.Column("first_step_at", sa.DateTime(), nullable=True),
    sa.Column("last_step_at", sa.DateTime(), nullable=True),
    sa.Column("error", sa.Text(), nullable=True),
    sa.Column("resumed_from", sa.Integer(), nullable=True),
    sa.Column("stop_requested", sa.Boolean(), nullable=False),
    sa.Column("stop_requested_at", sa.DateTime(), nullable=True),
    sa.Column("tags", sa.JSON(), nullable=False),
    sa.Column("notes", sa.Text(), nullable=False),
    sa.Column("log_path", sa.Text(), nullable=True),
    sa.Column("output_dir", sa.Text(), nullable=True),
    sa.ForeignKeyConstraint(["experiment_id"], ["experiments.id"], ondelete="CASCADE"),
    sa.ForeignKeyConstraint(["resumed_from"], ["runs.id"], ondelete="SET NULL"),
    sa.PrimaryKeyConstraint("id")
    )
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_runs_experiment_id"), ["experiment_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_runs_status"), ["status"], unique=False)

    op.create_table("checkpoints",
    sa.Column("id", sa.Integer(), nullable=False),
    sa.Column("run_id", sa.Integer(), nullable=False),
    sa.Column("step", sa.Integer(), nullable=False),
    sa.Column("path", sa.Text(), nullable=False),
    sa.Column("created_at", sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="CASCADE"),
    sa.PrimaryKeyConstraint("id")
    )
    with op.batch_alter_table("checkpoints", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_checkpoints_run_id"), ["run_id"], unique=False)

    op.create_table("episodes",
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
    sa.Column("run_id", sa.Integer(), nullable=False),
    sa.Column("step", sa.Integer(), nullable=False),
    sa.Column("split", sa.String(length=20), nullable=False),
    sa.Column("sample_index", sa.Integer(), nullable=False),
    sa.Column("item_index", sa.Integer(), nullable=True),
    sa.Column("reward", sa.Float(), nullable=False),
    sa.Column("ret", sa.Float(), nullable=False),
    sa.ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="CASCADE"),
    sa.PrimaryKeyConstraint("id")
    )
    with op.batch_alter_table("episodes", schema=None) as batch_op:
        batch_op.create_index("ix_episodes_run_step", ["run_id", "step"], unique=False)

    op.create_table("metrics",
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
    sa.Column("run_id", sa.Integer(), nullable=False),
    sa.Column("key", sa.String(length=200), nullable=False),
    sa.Column("step", sa.Integer(), nullable=False),
    sa.Column("env_step", sa.BigInteger(), nullable=True),
    sa.Column("value", sa.Float(), nullable=True),
    sa.Column("wall_time", sa.Float(), nullable=False),
    sa.ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="CASCADE"),
    sa.PrimaryKeyConstraint("id")
    )
    with op.batch_alter_table("metrics", schema=None) as batch_op:
        batch_op.create_index("ix_metrics_run_key_step", ["run_id", "key", "step", "value"], unique=False)

    op.create_table("workers",
    sa.Column("name", sa.String(length=200), nullable=False),
    sa.Column("host", sa.String(length=200), nullable=False),
    sa.Column("devices", sa.JSON(), nullable=False),
    sa.Column("queues", sa.JSON(), nullable=False),
    sa.Column("pid", sa.Integer(), nullable=True),
    sa.Column("online", sa.Boolean(), nullable=False),
    sa.Column("last_seen", sa.DateTime(), nullable=False),
    sa.Column("current_run_id", sa.Integer(), nullable=True),
    sa.ForeignKeyConstraint(["current_run_id"], ["runs.id"], ondelete="SET NULL"),
    sa.PrimaryKeyConstraint("name")
    )
    op.create_table("turns",
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
    sa.Column("episode_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
    sa.Column("run_id", sa.Integer(), nullable=False),
    sa.Column("step", sa.Integer(), nullable=False),
    sa.Column("turn", sa.Integer(), nullable=False),
    sa.Column("agent_index", sa.Integer(), nullable=False),
    sa.Column("agent_name", sa.String(length=200), nullable=False),
    sa.Column("prompt", sa.Text(), nullable=False),
    sa.Column("completion", sa.Text(), nullable=False),
    sa.Column("reward", sa.Float(), nullable=False),
    sa.Column("ret", sa.Float(), nullable=False),
    sa.Column("advantage", sa.Float(), nullable=False),
    sa.ForeignKeyConstraint(["episode_id"], ["episodes.id"], ondelete="CASCADE"),
    sa.ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="CASCADE"),
    sa.PrimaryKeyConstraint("id")
    )
    with op.batch_alter_table("turns", schema=None) as batch_op:
        batch_op.create_index("ix_turns_episode", ["episode_id"], unique=False)
        batch_op.create_index("ix_turns_run_step", ["run_id", "step"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("turns", schema=None) as batch_op:
        batch_op.drop_index("ix_turns_run_step")
        batch_op.drop_index("ix_turns_episode")

    op.drop_table("turns")
    op.drop_table("workers")
    with op.batch_alter_table("metrics", schema=None) as batch_op:
        batch_op.drop_index("ix_metrics_run_key_step")

    op.drop_table("metrics")
    with op.batch_alter_table("episodes", schema=None) as batch_op:
        batch_op.drop_index("ix_episodes_run_step")

    op.drop_table("episodes")
    with op.batch_alter_table("checkpoints", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_checkpoints_run_id"))

    op.drop_table("checkpoints")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_runs_status"))
        batch_op.drop_index(batch_op.f("ix_runs_experiment_id"))

    op.drop_table("runs")
    op.drop_table("experiments")
