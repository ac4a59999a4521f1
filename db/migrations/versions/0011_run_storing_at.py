"""A stopping run that is storing its artifacts: ``runs.storing_at``, when the run's job last finished
storing a file of its checkpoints or exports in the artifact store (the database server's time). The
stop grace period counts from the stop request or from this, whichever is later, so a job that is
still uploading its last checkpoint is not terminated in the middle of it.

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("storing_at", sa.DateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("storing_at")
