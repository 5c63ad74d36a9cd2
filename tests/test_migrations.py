"""Alembic owns the schema: upgrade → downgrade base → upgrade works and matches the models."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator

import numpy as np
import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, Engine, create_engine, inspect, text
from sqlalchemy.engine import make_url

from memsys import migrator
from memsys.models import Base

SCRATCH = "memsys_migrations_test"


@pytest.fixture
def scratch_engine() -> Iterator[Engine]:
    url = make_url(os.environ["MEMSYS_DATABASE_URL"])
    admin = create_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{SCRATCH}" WITH (FORCE)'))
        conn.execute(text(f'CREATE DATABASE "{SCRATCH}"'))
    engine = create_engine(url.set(database=SCRATCH))
    yield engine
    engine.dispose()
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{SCRATCH}" WITH (FORCE)'))
    admin.dispose()


def _run(engine: Engine, action: str, revision: str) -> None:
    with engine.begin() as conn:
        getattr(command, action)(migrator.alembic_config(conn), revision)


def test_upgrade_downgrade_upgrade_and_models_match(scratch_engine: Engine) -> None:
    _run(scratch_engine, "upgrade", "head")
    tables = set(inspect(scratch_engine).get_table_names())
    assert set(Base.metadata.tables) <= tables
    _run(scratch_engine, "downgrade", "base")
    assert set(inspect(scratch_engine).get_table_names()) <= {"alembic_version"}
    _run(scratch_engine, "upgrade", "head")
    with scratch_engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        assert context.get_current_revision() == migrator.head()
        assert compare_metadata(context, Base.metadata) == []
        extensions = conn.execute(text("SELECT extname FROM pg_extension")).scalars().all()
        assert "vector" in extensions
        # compare_metadata does not look at storage parameters (WITH (...)); check them here.
        for name, table in Base.metadata.tables.items():
            wanted = {
                k: str(v) for k, v in (table.dialect_options["postgresql"]["with"] or {}).items()
            }
            options = conn.scalar(
                text("SELECT reloptions FROM pg_class WHERE oid = CAST(:t AS regclass)"),
                {"t": name},
            )
            assert dict(o.split("=", 1) for o in options or []) == wanted, name


def test_memories_stored_with_windows_line_breaks_get_newlines(scratch_engine: Engine) -> None:
    """memory_store now keeps `\\n` only; memories stored before with `\\r\\n` are rewritten
    (with their content hash), except one whose rewritten text another live memory holds."""
    _run(scratch_engine, "upgrade", "c3a91f5e7d20")
    rows = {
        "mem_crlf": "Deploy steps:\r\n1. tag\r\n2. push",
        "mem_bare": "Old mac\rline two",
        "mem_twin": "Twin\r\ntext",
        "mem_lf": "Twin\ntext",  # the twin's text, already stored with \n
        "mem_gone": "Closed\r\nversion",
    }
    found, hashes = _upgraded_memories(scratch_engine, rows)
    assert found["mem_crlf"] == "Deploy steps:\n1. tag\n2. push"
    assert found["mem_bare"] == "Old mac\nline two"
    assert hashes["mem_crlf"] == _sha(found["mem_crlf"])
    assert found["mem_twin"] == rows["mem_twin"]  # its \n text is mem_lf's: left as it was
    assert found["mem_gone"] == rows["mem_gone"]  # history is not rewritten


def test_memories_stored_decomposed_get_their_composed_text(scratch_engine: Engine) -> None:
    """memory_store now stores NFC; memories stored before with an accent as a letter and a
    combining mark are composed (with their content hash), except one whose composed text
    another live memory holds; closed versions keep their text."""
    _run(scratch_engine, "upgrade", "c5d2e8a17f40")
    rows = {
        "mem_nfd": "Cafe\u0301 au lait at the re\u0301union",
        "mem_twin": "Zoe\u0308 likes tea",
        "mem_nfc": "Zo\u00eb likes tea",  # the twin's text, already stored composed
        "mem_gone": "Closed cafe\u0301",
        "mem_plain": "Nothing to compose here",
    }
    found, hashes = _upgraded_memories(scratch_engine, rows)
    assert found["mem_nfd"] == "Caf\u00e9 au lait at the r\u00e9union"
    assert hashes["mem_nfd"] == _sha(found["mem_nfd"])
    assert found["mem_twin"] == rows["mem_twin"]  # its composed text is mem_nfc's: left
    assert found["mem_gone"] == rows["mem_gone"]  # history is not rewritten
    assert (found["mem_plain"], hashes["mem_plain"]) == (rows["mem_plain"], _sha(rows["mem_plain"]))


def test_entities_named_decomposed_get_their_composed_name_and_key(
    scratch_engine: Engine,
) -> None:
    """Entity names are now read composed (NFC); live entities stored before with an accent
    as a letter and a combining mark get the composed name and the key it gives, except one
    whose composed key another live entity holds (left, both kept); closed ones keep theirs."""
    _run(scratch_engine, "upgrade", "a9d3f6b2c814")
    rows = [  # id, key, name, closed
        ("ent_kg", "kg#Cafe\u0301", "Cafe\u0301", False),
        ("ent_twin", "kg#Zoe\u0308", "Zoe\u0308", False),
        ("ent_nfc", "kg#Zo\u00eb", "Zo\u00eb", False),  # the twin's name, stored composed
        ("ent_gone", "kg#Ire\u0300ne", "Ire\u0300ne", True),
        ("ent_concept", "concept#cafe society", "Cafe\u0301 Society", False),
        ("ent_plain", "kg#Alice", "Alice", False),
    ]
    with scratch_engine.begin() as conn:
        conn.execute(text("INSERT INTO namespace (name) VALUES ('ns')"))
        for entity_id, key, name, closed in rows:
            conn.execute(
                text(
                    "INSERT INTO entity (namespace, id, key, name, entity_type, valid_to) "
                    "VALUES ('ns', :id, :key, :name, 'person', CASE WHEN :closed THEN now() END)"
                ),
                {"id": entity_id, "key": key, "name": name, "closed": closed},
            )
        facts = [  # id, attribute, closed
            ("fact_old", "dure\u0301e", True),
            ("fact_new", "dure\u0301e", False),
            ("fact_twin", "ro\u0302le", False),
            ("fact_nfc", "r\u00f4le", False),  # the twin's attribute, stored composed
        ]
        for fact_id, attribute, closed in facts:
            conn.execute(
                text(
                    "INSERT INTO fact (namespace, id, entity_id, attribute, content, valid_to) "
                    "VALUES ('ns', :id, 'ent_kg', :attribute, 'x', "
                    "CASE WHEN :closed THEN now() END)"
                ),
                {"id": fact_id, "attribute": attribute, "closed": closed},
            )
        conn.execute(
            text(
                "INSERT INTO edge (namespace, source_kind, source_id, target_kind, target_id, "
                "relation) VALUES ('ns', 'entity', 'ent_kg', 'entity', 'ent_plain', "
                "'appre\u0301cie')"
            )
        )
    _run(scratch_engine, "upgrade", "head")
    with scratch_engine.connect() as conn:
        found = {r.id: (r.key, r.name) for r in conn.execute(text("SELECT * FROM entity"))}
        attributes = dict(conn.execute(text("SELECT id, attribute FROM fact")).tuples().all())
        relations = conn.execute(text("SELECT relation FROM edge")).scalars().all()
    assert attributes == {
        "fact_old": "dur\u00e9e",  # the history with it: read by the same attribute
        "fact_new": "dur\u00e9e",
        "fact_twin": "ro\u0302le",  # r\u00f4le is taken: left
        "fact_nfc": "r\u00f4le",
    }
    assert relations == ["appr\u00e9cie"]
    assert found["ent_kg"] == ("kg#Caf\u00e9", "Caf\u00e9")
    assert found["ent_concept"] == ("concept#caf\u00e9 society", "Caf\u00e9 Society")
    assert found["ent_twin"] == ("kg#Zoe\u0308", "Zoe\u0308")  # Zoë is taken: left
    assert found["ent_gone"] == ("kg#Ire\u0300ne", "Ire\u0300ne")  # history is kept
    assert found["ent_plain"] == ("kg#Alice", "Alice")


def test_document_chunks_stored_decomposed_get_their_composed_text(
    scratch_engine: Engine,
) -> None:
    """Indexing now composes a document's text (queries are read composed): live chunks
    indexed before are composed with their content hash, closed ones keep their text."""
    _run(scratch_engine, "upgrade", "c5d2e8a17f40")
    texts = {"chk_live": "Notes from the re\u0301union", "chk_gone": "Old re\u0301union notes"}
    with scratch_engine.begin() as conn:
        conn.execute(text("INSERT INTO namespace (name) VALUES ('ns')"))
        conn.execute(
            text(
                "INSERT INTO document (namespace, id, source_file, file_type, sha256, "
                "size_bytes, chunk_count) VALUES ('ns', 'doc_1', '/notes.md', 'markdown', "
                "'x', 1, 2)"
            )
        )
        for n, (chunk_id, content) in enumerate(texts.items()):
            conn.execute(
                text(
                    "INSERT INTO chunk (namespace, id, doc_type, content, content_hash, "
                    "token_count, document_id, source_file, chunk_index, valid_to) VALUES "
                    "('ns', :id, 'document', :content, :hash, 5, 'doc_1', '/notes.md', :n, "
                    "CASE WHEN :gone THEN now() END)"
                ),
                {
                    "id": chunk_id,
                    "content": content,
                    "hash": _sha(content),
                    "n": n,
                    "gone": chunk_id == "chk_gone",
                },
            )
    _run(scratch_engine, "upgrade", "head")
    with scratch_engine.connect() as conn:
        now = {
            r.id: (r.content, r.content_hash)
            for r in conn.execute(text("SELECT id, content, content_hash FROM chunk"))
        }
    assert now["chk_live"] == ("Notes from the r\u00e9union", _sha("Notes from the r\u00e9union"))
    assert now["chk_gone"] == (texts["chk_gone"], _sha(texts["chk_gone"]))


def test_an_aged_memory_keeps_its_summary_and_hash_through_composition(
    scratch_engine: Engine,
) -> None:
    """An archived memory's row holds a summary, its content hash is that of its full text,
    and its history finds the full text by walking back from the row's exact summary: the
    upgrade that composes text leaves such a row alone (composing its summary lost the full
    text for export and rehydration, and gave it the summary's hash)."""
    from sqlalchemy.orm import Session

    from memsys.services import history

    _run(scratch_engine, "upgrade", "c5d2e8a17f40")
    full = "Cafe\u0301 au lait at the re\u0301union, every Monday before the standup."
    summary = "Cafe\u0301 au lait at the re\u0301union"
    _insert_memories(scratch_engine, {"mem_aged": (full, False)})
    with scratch_engine.begin() as conn:
        _archive(conn, full, summary)
    _run(scratch_engine, "upgrade", "head")
    with Session(scratch_engine) as session:
        row = session.execute(
            text("SELECT content, content_hash FROM chunk WHERE id = 'mem_aged'")
        ).one()
        assert (row.content, row.content_hash) == (summary, _sha(full))
        assert history.full_texts(session, [("ns", "mem_aged", row.content)]) == {
            ("ns", "mem_aged"): full
        }


def test_rows_hashed_before_dedup_read_unseen_characters_get_today_s_digest(
    scratch_engine: Engine,
) -> None:
    """A memory stored before dedup read zero-width and no-break spaces away kept the digest
    of its text as given: storing the same words without them made a second memory, and a
    store and a forget of it took different turns. Live rows get today's digest; one whose new
    digest another live memory holds, or a second old row reading the same, keeps its own
    (both are the user's memories); closed versions keep theirs; an aged memory gets the
    digest of its full text, found in its history."""
    from memsys.ids import content_hash, content_hashes

    _run(scratch_engine, "upgrade", "b2e7d4c9f315")
    full = "Backups\u00a0run nightly at two and keep fourteen days of snapshots."
    summary = "Backups\u00a0run nightly at two"
    rows = {
        "mem_zw": "Deploy with make\u200b release",
        "mem_nbsp": "Port\u00a08080 is the admin console",
        "mem_twin_a": "Tea\u200b time at four",
        "mem_twin_b": "Tea\u2060 time at four",  # reads as mem_twin_a: keeps its digest
        "mem_soft": "Coffee\u00ad break at ten",
        "mem_new": "Coffee break at ten",  # stored since, today's digest: mem_soft keeps its own
        "mem_gone": "Closed\u200b version",
        "mem_plain": "Nothing unseen here",
        "mem_aged": full,
    }
    # every character today's digest reads away, one row each
    unseen = "\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    unseen += "\u202f\u205f\u3000\u200b\u2060\ufeff\u00ad"
    each = {f"mem_char_{ord(c):04x}": f"one{c}two {ord(c)}" for c in unseen}
    rows |= each
    _insert_memories(scratch_engine, {k: (v, k == "mem_gone") for k, v in rows.items()})
    with scratch_engine.begin() as conn:
        _archive(conn, full, summary)
        conn.execute(
            text(
                "INSERT INTO document (namespace, id, source_file, file_type, sha256, "
                "size_bytes, chunk_count) VALUES ('ns', 'doc_1', '/n.md', 'markdown', 'x', 1, 1)"
            )
        )
        conn.execute(
            text(
                "INSERT INTO chunk (namespace, id, doc_type, content, content_hash, token_count, "
                "document_id, source_file, chunk_index) VALUES ('ns', 'chk_1', 'document', "
                ":content, :hash, 5, 'doc_1', '/n.md', 0)"
            ),
            {"content": "Read\ufeff me", "hash": _sha("Read\ufeff me")},
        )
    _run(scratch_engine, "upgrade", "head")
    with scratch_engine.connect() as conn:
        now = conn.execute(text("SELECT id, content, content_hash FROM chunk")).all()
    found = {r.id: r.content for r in now}
    hashes = {r.id: r.content_hash for r in now}
    for memory_id in ("mem_zw", "mem_nbsp", "mem_twin_a", *each):
        assert hashes[memory_id] == content_hash(rows[memory_id]) != _sha(rows[memory_id])
        assert found[memory_id] == rows[memory_id]  # the text is stored as given
    # "Deploy with make release" stored now finds the old row by its first digest
    assert content_hashes("Deploy with make release")[0] == hashes["mem_zw"]
    for kept in ("mem_twin_b", "mem_soft", "mem_gone", "mem_plain"):
        assert hashes[kept] == _sha(rows[kept])
    assert hashes["mem_new"] == content_hash(rows["mem_soft"])
    assert (found["mem_aged"], hashes["mem_aged"]) == (summary, content_hash(full))
    assert hashes["chk_1"] == content_hash("Read me") == content_hash("Read\ufeff me")


def test_edge_contexts_stored_with_windows_line_breaks_get_newlines(
    scratch_engine: Engine,
) -> None:
    """memory_relate now keeps `\n` only in a context; live edges stored before with `\r\n`
    or a bare `\r` are rewritten, closed ones (history) left as they were."""
    _run(scratch_engine, "upgrade", "a6c4e2b9d173")
    contexts = {1: "Because\r\nof this", 2: "Old mac\rline two", 3: "Closed\r\nedge", 4: None}
    with scratch_engine.begin() as conn:
        conn.execute(text("INSERT INTO namespace (name) VALUES ('ns')"))
        for n, context in contexts.items():
            conn.execute(
                text(
                    "INSERT INTO edge (namespace, source_kind, source_id, target_kind, "
                    "target_id, relation, context, valid_to) VALUES ('ns', 'chunk', :s, "
                    "'chunk', 'mem_b', 'relates_to', :context, CASE WHEN :closed THEN now() END)"
                ),
                {"s": f"mem_{n}", "context": context, "closed": n == 3},
            )
    _run(scratch_engine, "upgrade", "head")
    with scratch_engine.connect() as conn:
        found = dict(conn.execute(text("SELECT source_id, context FROM edge")).all())
    assert found == {
        "mem_1": "Because\nof this",
        "mem_2": "Old mac\nline two",
        "mem_3": "Closed\r\nedge",  # history is not rewritten
        "mem_4": None,
    }


def _sha(content: str) -> str:
    return hashlib.sha256(content.encode()).hexdigest()


def _upgraded_memories(
    engine: Engine, rows: dict[str, str]
) -> tuple[dict[str, str], dict[str, str]]:
    """`rows` (id → content; `mem_gone` closed) written as an earlier revision left them,
    then upgraded to head: each row's content and content hash after."""
    _insert_memories(engine, {k: (v, k == "mem_gone") for k, v in rows.items()})
    _run(engine, "upgrade", "head")
    with engine.connect() as conn:
        now = conn.execute(text("SELECT id, content, content_hash FROM chunk")).all()
    return {r.id: r.content for r in now}, {r.id: r.content_hash for r in now}


def _archive(conn: Connection, full: str, summary: str) -> None:
    """mem_aged archived as aging does: its text cut to `summary`, `full` kept in its history."""
    conn.execute(
        text("UPDATE chunk SET content = :s, stage = 'archived' WHERE id = 'mem_aged'"),
        {"s": summary},
    )
    conn.execute(
        text(
            "INSERT INTO memory_change (namespace, memory_id, field, old_value, new_value, "
            "operation) VALUES ('ns', 'mem_aged', 'content', to_jsonb(CAST(:old AS text)), "
            "to_jsonb(CAST(:new AS text)), 'archive')"
        ),
        {"old": full, "new": summary},
    )


def _insert_memories(
    engine: Engine, rows: dict[str, tuple[str, bool]], vectors: dict[str, np.ndarray] | None = None
) -> None:
    """Memories (id → content, closed?) of namespace 'ns' written straight into `chunk`, as
    an earlier revision's code left them; with their vectors when given."""
    from memsys.retrieval.dense import literal
    from memsys.tokens import count_tokens

    with engine.begin() as conn:
        conn.execute(text("INSERT INTO namespace (name) VALUES ('ns')"))
        for memory_id, (content, closed) in rows.items():
            vector = (vectors or {}).get(memory_id)
            conn.execute(
                text(
                    "INSERT INTO chunk (namespace, id, doc_type, memory_type, content, "
                    "content_hash, token_count, embedding, valid_to) VALUES ('ns', :id, "
                    "'memory', 'fact', :content, :hash, :tokens, CAST(:vector AS vector), "
                    "CASE WHEN :closed THEN now() END)"
                ),
                {
                    "id": memory_id,
                    "content": content,
                    "hash": _sha(content),
                    "tokens": count_tokens(content),
                    "vector": None if vector is None else literal(vector),
                    "closed": closed,
                },
            )


def test_rows_stored_before_get_their_identifier_parts(scratch_engine: Engine) -> None:
    """The upgrade that reads paths and hosts by their parts rewrites every stored row's
    tsvector and counts the term statistics again from it (a closed row counts nowhere)."""
    _run(scratch_engine, "upgrade", "e8b3f1c6a290")
    rows = {
        "mem_path": ("Fix in billing/invoice.py", False),
        "mem_host": ("Grafana at grafana.prod.acme.io", False),
        "mem_closed": ("Old note on billing/invoice.py", True),
    }
    _insert_memories(scratch_engine, rows)
    _run(scratch_engine, "upgrade", "head")
    with scratch_engine.connect() as conn:
        found = conn.execute(
            text("SELECT id FROM chunk WHERE tsv @@ to_tsquery('simple', 'invoice.py') ORDER BY id")
        ).scalars()
        assert list(found) == ["mem_closed", "mem_path"]
        df = dict(
            conn.execute(text("SELECT lexeme, df FROM term_stat WHERE namespace = 'ns'")).all()
        )
        recount = dict(
            conn.execute(
                text(
                    "SELECT u.lexeme, count(*) FROM chunk c, unnest(c.tsv) u "
                    "WHERE c.valid_to IS NULL GROUP BY 1"
                )
            ).all()
        )
    assert df == recount
    assert df["invoice.py"] == 1 and df["grafana"] == 1 and df["prod"] == 1


def test_an_owner_that_is_not_a_superuser_recounts_every_row(scratch_engine: Engine) -> None:
    """Row-level security is forced on the data tables, so a migration run by their owner
    without memsys's connection settings saw no rows: the statistics recount of the upgrade
    to identifier parts counted nothing, and a later close drove counts below zero."""
    role = "memsys_migration_owner"
    url = scratch_engine.url
    admin = create_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(
            text(
                f"DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{role}') "
                f"THEN CREATE ROLE {role} LOGIN NOSUPERUSER; END IF; END $$"
            )
        )
        conn.execute(text(f'ALTER DATABASE "{SCRATCH}" OWNER TO {role}'))
        # The tenant role is cluster-wide and exists since the suite's own database migrated;
        # only a superuser (or its admin) may grant it, as a DBA would.
        conn.execute(text(f"GRANT memsys_tenant TO {role}"))
    admin.dispose()
    with scratch_engine.begin() as conn:  # an extension needs the superuser; the rest does not
        conn.execute(text("CREATE EXTENSION IF NOT EXISTS vector"))
        conn.execute(text(f"GRANT CREATE ON SCHEMA public TO {role}"))
    owner = create_engine(url.set(username=role))
    try:
        _run(owner, "upgrade", "e8b3f1c6a290")
        with owner.begin() as conn:
            conn.execute(
                text(
                    "SELECT set_config('memsys.read', '*', true), "
                    "set_config('memsys.write', '*', true)"
                )
            )
            conn.execute(text("INSERT INTO namespace (name) VALUES ('ns')"))
            conn.execute(
                text(
                    "INSERT INTO chunk (namespace, id, doc_type, memory_type, content, "
                    "content_hash, token_count) VALUES ('ns', 'mem_path', 'memory', 'fact', "
                    "'Fix in billing/invoice.py', 'h', 3)"
                )
            )
        _run(owner, "upgrade", "head")
        with owner.connect() as conn:  # the upgrade's settings ended with its transaction
            assert conn.scalar(text("SELECT current_setting('memsys.read', true)")) in ("", None)
    finally:
        owner.dispose()
    with scratch_engine.begin() as conn:  # the superuser reads past the policies
        df = dict(conn.execute(text("SELECT lexeme, df FROM term_stat")).all())
        conn.execute(text(f"REASSIGN OWNED BY {role} TO CURRENT_USER"))
        conn.execute(text(f"DROP OWNED BY {role}"))  # what is left: its grants
    admin = create_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:  # the role goes with the test, as the database does
        conn.execute(text(f'ALTER DATABASE "{SCRATCH}" OWNER TO CURRENT_USER'))
        conn.execute(text(f"DROP ROLE {role}"))
    admin.dispose()
    assert df.get("invoice.py") == 1 and df.get("fix") == 1


def test_the_printed_upgrade_sees_every_namespace_before_it_changes_rows() -> None:
    """`memsys migrate --dry-run` prints SQL a DBA may run by hand as the tables' owner; it
    must set what memsys's own connections set, or its recounts see no rows."""
    sql = migrator.upgrade_sql("head", "e8b3f1c6a290")
    settings = sql.index("set_config('memsys.read', '*', false), set_config('memsys.write'")
    assert settings < sql.index("DELETE FROM term_stat")


def test_long_rows_stored_before_are_queued_and_embedded_again_whole(
    scratch_engine: Engine, embedder
) -> None:
    """Vectors of live chunks over the model's window were made from their first 254 tokens:
    the upgrade clears them, which queues them, and the embedding queue's next batch gives
    them the vector memory_store gives the same text now. Short and closed rows keep theirs."""
    from sqlalchemy.orm import Session

    from memsys.embeddings import get_embedder
    from memsys.services import embedding_queue
    from memsys.tokens import truncate_to_tokens

    long_text = " ".join(f"Paragraph {n} of a long design note on the queue." for n in range(40))
    rows = {
        "mem_long": (long_text, False),
        "mem_short": ("A short note", False),
        "mem_long_closed": (long_text + " Closed.", True),
    }
    old = {  # what the code before made: the first window's vector
        memory_id: get_embedder().embed([truncate_to_tokens(content, 254)])[0]
        for memory_id, (content, _) in rows.items()
    }
    _run(scratch_engine, "upgrade", "f3a8d5c2e917")
    _insert_memories(scratch_engine, rows, old)
    _run(scratch_engine, "upgrade", "head")
    with Session(scratch_engine) as session:
        assert embedding_queue.pending_count(session) == 1
        assert embedding_queue.embed_pending(session) == 1
        session.commit()
        stored = dict(session.execute(text("SELECT id, embedding::text FROM chunk")).tuples().all())
    vectors = {k: np.asarray(json.loads(v), dtype=np.float32) for k, v in stored.items()}
    assert np.allclose(vectors["mem_short"], old["mem_short"], atol=1e-6)
    assert np.allclose(vectors["mem_long_closed"], old["mem_long_closed"], atol=1e-6)
    now = get_embedder().embed([long_text])[0]
    assert np.allclose(vectors["mem_long"], now, atol=1e-6)
    assert not np.allclose(vectors["mem_long"], old["mem_long"], atol=1e-3)


def test_a_server_not_in_utf8_upgrades_to_head(scratch_engine: Engine) -> None:
    """A database whose encoding is not UTF-8 (LATIN1, as an old cluster's initdb made it)
    upgrades to head: the upgrades that read Unicode text change nothing there, and none of
    them fails before it reads which encoding it runs on."""
    url = make_url(os.environ["MEMSYS_DATABASE_URL"])
    admin = create_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{SCRATCH}" WITH (FORCE)'))
        conn.execute(
            text(
                f"CREATE DATABASE \"{SCRATCH}\" ENCODING 'LATIN1' TEMPLATE template0 "
                "LC_COLLATE 'C' LC_CTYPE 'C'"
            )
        )
    admin.dispose()
    _run(scratch_engine, "upgrade", "head")
    with scratch_engine.connect() as conn:
        assert conn.scalar(text("SHOW server_encoding")) == "LATIN1"
        context = MigrationContext.configure(conn)
        assert context.get_current_revision() == migrator.head()


def test_graph_names_stored_with_unseen_characters_get_the_name_read_now(
    scratch_engine: Engine,
) -> None:
    """Graph names are now read as dedup reads text (a no-break space a space, a zero-width
    space nothing): a live entity stored before under "Alice<no-break space>Smith" was found
    by no name a caller could send (delete_entities, add_observations, create_relations all
    read the name folded) and the same name sent again made a second entity. Live entities
    get the folded name and its key, unless another live entity holds it (or a second old
    one folds to it too); relation types and fact attributes get theirs, history included,
    unless their entity (or their two ends) has the folded one already."""
    _run(scratch_engine, "upgrade", "b2e7d4c9f315")
    rows = [  # id, name, closed
        ("ent_nbsp", "Alice\u00a0Smith", False),
        ("ent_zw", "Bob\u200bJones", False),
        ("ent_edge", "\u200b Eve", False),  # read: " Eve", stripped as a name is
        ("ent_twin", "Carol\u00a0Ann", False),
        ("ent_plain", "Carol Ann", False),  # the twin's folded name, stored since: left
        ("ent_twin2", "Dan\u2060Lee", False),
        ("ent_twin3", "Dan\ufeffLee", False),  # folds as ent_twin2 does: the first one wins
        ("ent_gone", "Erin\u00a0Ko", True),  # history keeps its name
        ("ent_blank", "\u200b", False),  # no name once read: left
    ]
    with scratch_engine.begin() as conn:
        conn.execute(text("INSERT INTO namespace (name) VALUES ('ns')"))
        for entity_id, name, closed in rows:
            conn.execute(
                text(
                    "INSERT INTO entity (namespace, id, key, name, entity_type, valid_to) "
                    "VALUES ('ns', :id, :key, :name, 'person', CASE WHEN :closed THEN now() END)"
                ),
                {"id": entity_id, "key": "kg#" + name, "name": name, "closed": closed},
            )
        facts = [  # id, attribute, closed
            ("fact_old", "time\u200bout", True),
            ("fact_new", "time\u200bout", False),
            ("fact_twin", "own\u00a0er", False),
            ("fact_plain", "own er", False),  # the twin's folded attribute: left
        ]
        for fact_id, attribute, closed in facts:
            conn.execute(
                text(
                    "INSERT INTO fact (namespace, id, entity_id, attribute, content, valid_to) "
                    "VALUES ('ns', :id, 'ent_nbsp', :attribute, 'x', "
                    "CASE WHEN :closed THEN now() END)"
                ),
                {"id": fact_id, "attribute": attribute, "closed": closed},
            )
        conn.execute(
            text(
                "INSERT INTO edge (namespace, source_kind, source_id, target_kind, target_id, "
                "relation) VALUES ('ns', 'entity', 'ent_nbsp', 'entity', 'ent_zw', "
                "'works\u00a0with')"
            )
        )
    _run(scratch_engine, "upgrade", "head")
    with scratch_engine.connect() as conn:
        found = {r.id: (r.key, r.name) for r in conn.execute(text("SELECT * FROM entity"))}
        attributes = dict(conn.execute(text("SELECT id, attribute FROM fact")).tuples().all())
        relations = conn.execute(text("SELECT relation FROM edge")).scalars().all()
    assert found["ent_nbsp"] == ("kg#Alice Smith", "Alice Smith")
    assert found["ent_zw"] == ("kg#BobJones", "BobJones")
    assert found["ent_edge"] == ("kg#Eve", "Eve")
    assert found["ent_twin"] == ("kg#Carol\u00a0Ann", "Carol\u00a0Ann")
    assert found["ent_twin2"] == ("kg#DanLee", "DanLee")
    assert found["ent_twin3"] == ("kg#Dan\ufeffLee", "Dan\ufeffLee")
    assert found["ent_gone"] == ("kg#Erin\u00a0Ko", "Erin\u00a0Ko")
    assert found["ent_blank"] == ("kg#\u200b", "\u200b")
    assert attributes == {
        "fact_old": "timeout",  # the history with it: read by the same attribute
        "fact_new": "timeout",
        "fact_twin": "own\u00a0er",
        "fact_plain": "own er",
    }
    assert relations == ["works with"]
