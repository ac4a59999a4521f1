"""Each run's environment: ``run_environments`` (one row per run, deleted with it), the git commit,
dirty diff, Python and package versions, host and command line its job recorded when it started
(``jobs.run_environment``).

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "run_environments",
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("captured_at", sa.DateTime(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("run_environments")
