"""Saved views: ``saved_views``, what a dashboard user chose to see, kept across sessions and browsers
(the runs table's columns per experiment, the charts of the run page and Compare): one JSON choice per
owner, view and scope (``Store.save_view``).

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "saved_views",
        sa.Column("owner", sa.String(length=100), primary_key=True),
        sa.Column("view", sa.String(length=40), primary_key=True),
        sa.Column("scope", sa.String(length=100), primary_key=True),
        sa.Column("choice", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("saved_views")
