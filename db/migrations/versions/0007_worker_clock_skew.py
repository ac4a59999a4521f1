"""Workers' clock skew: ``workers.clock_skew_s``, the seconds a worker's clock was ahead of the database
server's (negative: behind) when it last registered. Liveness times are the server's own
(:mod:`db.clock`); this is shown so an operator sees a machine whose clock is off.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("workers") as batch:
        batch.add_column(sa.Column("clock_skew_s", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("workers") as batch:
        batch.drop_column("clock_skew_s")
