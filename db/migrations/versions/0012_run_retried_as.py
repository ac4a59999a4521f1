"""The retry policy's mark on a lost run: ``runs.retried_as``, the id of the attempt that the retry
policy (``retry.max_attempts`` of the run config, :mod:`jobs.retries`) queued after the run was lost.
Setting it is the compare-and-set (``... WHERE retried_as IS NULL``) that makes the retry happen once
when several processes settle the run at the same time. It is a plain id, not a foreign key: deleting
the new attempt must not make the lost run look not retried (the policy would queue it again).

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("retried_as", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("retried_as")
