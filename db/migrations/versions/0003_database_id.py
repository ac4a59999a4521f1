"""The database's own id: ``cooplab_meta`` (key, value) holding ``database_id``, a random id.

A data directory records the id of the database that owns it, so two databases pointed at one data
directory (run folders are keyed by run id) are told apart and the second is refused.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    meta = op.create_table("cooplab_meta",
    sa.Column("key", sa.String(length=100), nullable=False),
    sa.Column("value", sa.Text(), nullable=False),
    sa.PrimaryKeyConstraint("key")
    )
    op.bulk_insert(meta, [{"key": "database_id", "value": uuid.uuid4().hex}])


def downgrade() -> None:
    op.drop_table("cooplab_meta")
