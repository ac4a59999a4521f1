"""Checkpoints in the artifact store: ``checkpoints.artifact_url``, the store URL of a checkpoint's
uploaded copy, set only once the upload completed and was checked; empty while only the local copy
exists (and for every checkpoint of the embedded local store).

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("checkpoints") as batch:
        batch.add_column(sa.Column("artifact_url", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("checkpoints") as batch:
        batch.drop_column("artifact_url")
