"""Query traces for the context-assembly debugger: channels, fusion, attribution, lookup.

What: `query_trace` gets `channels` (each channel's candidate pool with scores, ranked),
`fusion` (fusion version and weights, the retrieval request and the query embedding's
digest), `error_subtype` (S004's context-bug category, checked against its four values), and
a GIN index (jsonb_path_ops) on `retrieved`.
Why: replay needs the request and the weights a trace used; `memsys trace why` and error
attribution need every channel's candidates; "which queries returned memory X" (sql/) must
not scan every trace. Existing traces keep empty channels/fusion: they cannot be replayed,
and replay says so.

Revision ID: 5d2f8e4a7c19
Revises: a4f0c2d81e63
Create Date: 2026-11-23 10:45:00+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "5d2f8e4a7c19"
down_revision: str | None = "a4f0c2d81e63"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SUBTYPES = (
    "wrong_store_queried",
    "wrong_mode_detected",
    "wrong_lifecycle_filter",
    "retrieval_ranking_error",
)


def upgrade() -> None:
    jsonb = postgresql.JSONB(astext_type=sa.Text())
    op.add_column("query_trace", sa.Column("channels", jsonb, server_default="{}", nullable=False))
    op.add_column("query_trace", sa.Column("fusion", jsonb, server_default="{}", nullable=False))
    op.add_column("query_trace", sa.Column("error_subtype", sa.String(length=32), nullable=True))
    quoted = ", ".join(f"'{v}'" for v in SUBTYPES)
    op.create_check_constraint(
        op.f("ck_query_trace_subtype"),
        "query_trace",
        f"error_subtype IS NULL OR error_subtype IN ({quoted})",
    )
    op.create_index(
        "ix_query_trace_retrieved",
        "query_trace",
        ["retrieved"],
        postgresql_using="gin",
        postgresql_ops={"retrieved": "jsonb_path_ops"},
    )


def downgrade() -> None:
    op.drop_index("ix_query_trace_retrieved", table_name="query_trace")
    op.drop_constraint(op.f("ck_query_trace_subtype"), "query_trace", type_="check")
    op.drop_column("query_trace", "error_subtype")
    op.drop_column("query_trace", "fusion")
    op.drop_column("query_trace", "channels")
