"""Scoped API tokens, and tenancy enforced by PostgreSQL row-level security.

What:
- `api_token`: scoped tokens (sha256 of the secret, glob namespace patterns, read or
  read-write, optional expiry, revocation). No namespace column, never granted to tenants.
- `memsys_can_read(ns)` / `memsys_can_write(ns)`: true when `ns` matches one of the LIKE
  patterns in the settings `memsys.read` / `memsys.write` ('*' = every namespace, unset or
  empty = none). memsys's own connections default both to '*' (connection options); a
  transaction run for a scoped token sets them with `set_config(…, true)`, so they last
  exactly one transaction (memsys/tenancy.py).
- `memsys_protect(table, column, kind)`: ENABLE + FORCE row-level security on a table and
  its policies, by kind:
  `data` (reads need read, every change needs write), `log` (event, traces: a reader may
  append the bookkeeping rows of its reads; '*' rows of a scoped token become '*@<token id>',
  readable by that token and by admins only), `counted` (chunk: as `data`, but a reader may
  update a row when only `access_count` / `last_accessed_at` change, checked by a trigger).
  Every table with a namespace column goes through it here; a later migration that adds such
  a table calls it too (tests/security/test_row_security.py fails until it does).
- The role `memsys_tenant` (NOLOGIN, no BYPASSRLS), granted the data tables: a scoped
  transaction switches to it with `SET LOCAL ROLE`, because superusers (the embedded server's
  user, docker's POSTGRES_USER) bypass row-level security even when it is forced. It is
  created when the migrating user may create roles; elsewhere FORCE is what applies policies
  to the (non-superuser) owner.
- The full-text match (`tsv @@ query`) is marked LEAKPROOF when the migrating user is a
  superuser, so that row-level security does not keep the GIN index from a scoped search.
Why: namespaces were filters that every service had to remember; with policies, a forgotten
WHERE in any service cannot read, change or delete another tenant's rows (issue 8).

Revision ID: 5d2f8e61c0a7
Revises: 5d2e8f1a6c37
Create Date: 2026-11-23 11:00:00+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "5d2f8e61c0a7"
down_revision: str | None = "5d2e8f1a6c37"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TENANT_ROLE = "memsys_tenant"

# (table, namespace column, kind) — every namespaced table at this revision.
PROTECTED = (
    ("namespace", "name", "data"),
    ("document", "namespace", "data"),
    ("chunk", "namespace", "counted"),
    ("entity", "namespace", "data"),
    ("fact", "namespace", "data"),
    ("edge", "namespace", "data"),
    ("preference", "namespace", "data"),
    ("term_stat", "namespace", "data"),
    ("corpus_stat", "namespace", "data"),
    ("event", "namespace", "log"),
    ("query_trace", "namespace", "log"),
    ("validation_event", "namespace", "log"),
    ("agent_trace", "namespace", "log"),
    ("memory_access", "namespace", "log"),
    ("memory_change", "namespace", "log"),
    ("episode", "namespace", "data"),
)

FUNCTIONS = r"""
CREATE FUNCTION memsys_allowed(ns text, patterns text) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE AS
$$ SELECT CASE coalesce(patterns, '') WHEN '*' THEN true WHEN '' THEN false
          ELSE ns LIKE ANY (string_to_array(patterns, ',')) END $$;

CREATE FUNCTION memsys_can_read(ns text) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE AS
$$ SELECT memsys_allowed(ns, current_setting('memsys.read', true)) $$;

CREATE FUNCTION memsys_can_write(ns text) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE AS
$$ SELECT memsys_allowed(ns, current_setting('memsys.write', true)) $$;

-- A log row a session may read and append: its namespaces, and its own cross-namespace rows.
CREATE FUNCTION memsys_can_log(ns text) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE AS
$$ SELECT memsys_can_read(ns)
          OR ns = '*@' || coalesce(nullif(current_setting('memsys.token', true), ''), '-') $$;

-- '*' (an operation over every namespace) written by a scoped token: its own rows.
CREATE FUNCTION memsys_own_star() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    IF coalesce(current_setting('memsys.token', true), '') <> '' THEN
        NEW.namespace := '*@' || current_setting('memsys.token', true);
    END IF;
    RETURN NEW;
END $fn$;

-- A scoped reader may count an access (recall bumps access_count), and change nothing else.
-- (Only scoped transactions set memsys.token; a superuser's psql session is not stopped.)
CREATE FUNCTION memsys_bookkeeping_only() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
    skip text[];
BEGIN
    SELECT array_agg(attname::text) INTO skip FROM pg_attribute
    WHERE attrelid = TG_RELID AND attgenerated <> '';
    skip := coalesce(skip, '{}') || ARRAY['access_count', 'last_accessed_at'];
    IF (to_jsonb(NEW) - skip) IS DISTINCT FROM (to_jsonb(OLD) - skip) THEN
        RAISE EXCEPTION 'namespace % is read-only for this token', OLD.namespace
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END $fn$;

CREATE FUNCTION memsys_protect(tbl text, col text, kind text) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    reader text := CASE kind WHEN 'log' THEN 'memsys_can_log' ELSE 'memsys_can_read' END;
    appender text := CASE kind WHEN 'log' THEN 'memsys_can_log' ELSE 'memsys_can_write' END;
    updater text := CASE kind WHEN 'counted' THEN 'memsys_can_read' ELSE 'memsys_can_write' END;
BEGIN
    IF kind NOT IN ('data', 'log', 'counted') THEN
        RAISE EXCEPTION 'memsys_protect: unknown kind %', kind;
    END IF;
    EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', tbl);
    EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', tbl);
    EXECUTE format('CREATE POLICY memsys_select ON %I FOR SELECT USING (%s(%I))',
                   tbl, reader, col);
    EXECUTE format('CREATE POLICY memsys_insert ON %I FOR INSERT WITH CHECK (%s(%I))',
                   tbl, appender, col);
    EXECUTE format('CREATE POLICY memsys_update ON %I FOR UPDATE USING (%s(%I)) '
                   'WITH CHECK (%s(%I))', tbl, updater, col, updater, col);
    EXECUTE format('CREATE POLICY memsys_delete ON %I FOR DELETE USING (memsys_can_write(%I))',
                   tbl, col);
    IF kind = 'log' THEN
        EXECUTE format('CREATE TRIGGER memsys_own_star BEFORE INSERT ON %I FOR EACH ROW '
                       'WHEN (NEW.%I = ''*'') EXECUTE FUNCTION memsys_own_star()', tbl, col);
    ELSIF kind = 'counted' THEN
        EXECUTE format('CREATE TRIGGER memsys_bookkeeping_only BEFORE UPDATE ON %I '
                       'FOR EACH ROW WHEN (NOT memsys_can_write(OLD.%I) AND '
                       'coalesce(current_setting(''memsys.token'', true), '''') <> '''') '
                       'EXECUTE FUNCTION memsys_bookkeeping_only()', tbl, col);
    END IF;
END $fn$;

CREATE FUNCTION memsys_unprotect(tbl text) RETURNS void LANGUAGE plpgsql AS $fn$
BEGIN
    EXECUTE format('DROP POLICY IF EXISTS memsys_select ON %I', tbl);
    EXECUTE format('DROP POLICY IF EXISTS memsys_insert ON %I', tbl);
    EXECUTE format('DROP POLICY IF EXISTS memsys_update ON %I', tbl);
    EXECUTE format('DROP POLICY IF EXISTS memsys_delete ON %I', tbl);
    EXECUTE format('DROP TRIGGER IF EXISTS memsys_own_star ON %I', tbl);
    EXECUTE format('DROP TRIGGER IF EXISTS memsys_bookkeeping_only ON %I', tbl);
    EXECUTE format('ALTER TABLE %I NO FORCE ROW LEVEL SECURITY', tbl);
    EXECUTE format('ALTER TABLE %I DISABLE ROW LEVEL SECURITY', tbl);
END $fn$;
"""

DROP_FUNCTIONS = """
DROP FUNCTION memsys_unprotect(text);
DROP FUNCTION memsys_protect(text, text, text);
DROP FUNCTION memsys_bookkeeping_only();
DROP FUNCTION memsys_own_star();
DROP FUNCTION memsys_can_log(text);
DROP FUNCTION memsys_can_write(text);
DROP FUNCTION memsys_can_read(text);
DROP FUNCTION memsys_allowed(text, text);
"""

# The tenant role is cluster-wide; its privileges are per database (and per schema).
GRANT_TENANT = f"""
DO $do$
DECLARE
    me record;
BEGIN
    SELECT rolsuper, rolcreaterole INTO me FROM pg_roles WHERE rolname = current_user;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{TENANT_ROLE}') THEN
        IF NOT (me.rolsuper OR me.rolcreaterole) THEN
            RAISE NOTICE 'memsys: no role {TENANT_ROLE} (this user may not create roles)';
            RETURN;
        END IF;
        CREATE ROLE {TENANT_ROLE} NOLOGIN NOBYPASSRLS;
    END IF;
    IF NOT me.rolsuper AND NOT pg_has_role(current_user, '{TENANT_ROLE}', 'MEMBER') THEN
        EXECUTE format('GRANT {TENANT_ROLE} TO %I', current_user);
    END IF;
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO {TENANT_ROLE}', current_schema());
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA %I '
                   'TO {TENANT_ROLE}', current_schema());
    EXECUTE format('GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA %I TO {TENANT_ROLE}',
                   current_schema());
    EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA %I GRANT SELECT, INSERT, UPDATE, '
                   'DELETE ON TABLES TO {TENANT_ROLE}', current_schema());
    EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA %I GRANT USAGE, SELECT ON SEQUENCES '
                   'TO {TENANT_ROLE}', current_schema());
    REVOKE ALL ON api_token, alembic_version FROM {TENANT_ROLE};
END $do$;
"""

# Under row-level security the planner uses an index for a caller's condition only when the
# condition's function is LEAKPROOF; `tsv @@ query` is not marked so, and a scoped recall's
# BM25 channel fell from the GIN index to a sequential scan (2.7 ms -> 120 ms at 100k chunks).
# The full-text match returns a boolean, has no side effects and raises no error that depends
# on the row, so it is marked LEAKPROOF — which only a superuser may do (the embedded server,
# docker's POSTGRES_USER); elsewhere the scan stays and the README says so.
FULLTEXT_MATCH = ("ts_match_vq(tsvector, tsquery)", "ts_match_qv(tsquery, tsvector)")
LEAKPROOF = """
DO $do$
BEGIN
    IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        {statements}
    END IF;
END $do$;
"""

REVOKE_TENANT = f"""
DO $do$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{TENANT_ROLE}') THEN
        RETURN;
    END IF;
    EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA %I REVOKE ALL ON TABLES '
                   'FROM {TENANT_ROLE}', current_schema());
    EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA %I REVOKE ALL ON SEQUENCES '
                   'FROM {TENANT_ROLE}', current_schema());
    EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA %I FROM {TENANT_ROLE}', current_schema());
    EXECUTE format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA %I FROM {TENANT_ROLE}',
                   current_schema());
    EXECUTE format('REVOKE ALL ON SCHEMA %I FROM {TENANT_ROLE}', current_schema());
    BEGIN
        DROP ROLE {TENANT_ROLE};
    EXCEPTION WHEN dependent_objects_still_exist OR insufficient_privilege THEN
        NULL;  -- another database on this server still uses it
    END;
END $do$;
"""


def upgrade() -> None:
    op.create_table(
        "api_token",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("secret_sha256", sa.String(length=64), nullable=False),
        sa.Column("namespaces", postgresql.ARRAY(sa.String(length=130)), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("mode IN ('read', 'read-write')", name=op.f("ck_api_token_mode")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_token")),
        sa.UniqueConstraint("secret_sha256", name=op.f("uq_api_token_secret_sha256")),
    )
    op.execute(FUNCTIONS)
    for table, column, kind in PROTECTED:
        op.execute(sa.text(f"SELECT memsys_protect('{table}', '{column}', '{kind}')"))
    op.execute(GRANT_TENANT)
    op.execute(leakproof(True))


def leakproof(on: bool) -> str:
    flag = "LEAKPROOF" if on else "NOT LEAKPROOF"
    return LEAKPROOF.format(
        statements=" ".join(f"ALTER FUNCTION pg_catalog.{f} {flag};" for f in FULLTEXT_MATCH)
    )


def downgrade() -> None:
    op.execute(leakproof(False))
    op.execute(REVOKE_TENANT)
    for table, _column, _kind in PROTECTED:
        op.execute(sa.text(f"SELECT memsys_unprotect('{table}')"))
    op.execute(DROP_FUNCTIONS)
    op.drop_table("api_token")
