"""Pass 2 of an import: compare a batch of records with the database and write the difference.

A new memory is inserted with its own id and times (so export → import → export gives the
same bytes) and embedded with its batch, at the model's batch speed, on a thread that embeds
the next batch while this one is written. A memory whose id
exists with different fields becomes a new version, never an overwrite: the old row is
copied under a new id and closed (`valid_to`), the live row takes the new fields, and a
`supersedes` edge joins the two — the way memsys keeps history for every row users change.
Content already stored under another id in the namespace is a duplicate (as memory_store
dedups); edges naming the file's id then point at the stored one. Preferences go through
the preference service, which versions them itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy import ColumnElement, func, insert, select, text, update
from sqlalchemy.orm import Session

from memsys import ids
from memsys.db import json_text
from memsys.embeddings import get_embedder
from memsys.ids import content_hashes
from memsys.jsonvalue import same
from memsys.models import Chunk, Edge, Event, Preference
from memsys.models.chunk import AGED
from memsys.retrieval import dense
from memsys.schemas.preferences import PreferenceRestoreIn
from memsys.services import mentions, namespaces, preferences
from memsys.services.history import full_texts
from memsys.tokens import count_tokens
from memsys.vault.live import canonical
from memsys.vault.records import (
    HAPPENED_UNKNOWN,
    UNEDITED,
    VERSIONED,
    Located,
    Problem,
    Record,
    timestamp,
)
from memsys.vocabulary import EDITED_COPY

if TYPE_CHECKING:
    from memsys.vault.importer import Report

OPERATION = "memory_import"
_COPY = text(
    """
    INSERT INTO chunk (namespace, id, doc_type, content, content_hash, token_count, embedding,
                       memory_type, importance, confidence, tags, metadata, lifecycle, stage,
                       pinned, access_count, last_accessed_at, occurred_at, created_at,
                       updated_at, valid_from, valid_to)
    SELECT namespace, :copy, doc_type, content, content_hash, token_count, embedding,
           memory_type, importance, confidence, tags, metadata, lifecycle, stage, pinned,
           access_count, last_accessed_at, occurred_at, created_at, updated_at, valid_from,
           now()
    FROM chunk WHERE namespace = :namespace AND id = :id AND valid_to IS NULL
    """
)
# A batch's new rows in one statement (the term-statistics triggers run once per statement),
# as one JSON document; a vector in it is pgvector's text form (dense.literal: the shortest
# decimals that read back as the same float32, ~20x faster than pgvector's own formatting).
# The multi-row INSERT this replaces spent two thirds of the import's Python time (10k
# memories: ~3 of 5 s, taken from the model on two cores) writing vectors as text and
# splicing ~20 parameters per row into a statement too long for the driver's cache. The same
# values land (the JSONB is the one the parameter had).
_INSERT = text(
    """
    INSERT INTO chunk (namespace, id, doc_type, content, content_hash, token_count, embedding,
                       memory_type, importance, confidence, tags, metadata, lifecycle, stage,
                       pinned, occurred_at, created_at, updated_at)
    SELECT r.namespace, r.id, 'memory', r.content, r.content_hash, r.token_count,
           CAST(r.embedding AS vector), r.memory_type, r.importance, r.confidence, r.tags,
           r.meta, r.lifecycle, r.stage, r.pinned, r.occurred_at, r.created_at, r.updated_at
    FROM jsonb_to_recordset(CAST(:rows AS jsonb)) AS r(
             namespace text, id text, content text, content_hash text, token_count integer,
             embedding text, memory_type text, importance float8, confidence float8,
             tags text[], meta jsonb, lifecycle text, stage text, pinned boolean,
             occurred_at timestamptz, created_at timestamptz, updated_at timestamptz)
    """
)
# A JSON document of a batch's rows holds at most this many characters of content: jsonb
# values are capped at 256 MB, and MEMSYS_MAX_CONTENT_CHARS allows memories of up to 10M
# characters, so a batch of long memories goes in several statements (at most 4 bytes a
# character: ≤ 128 MB each). A batch of ordinary memories (32,000 characters at most) is one.
INSERT_CHARS = 32_000_000
_HOLDER = text(
    """
    SELECT content_hash, id FROM chunk
    WHERE namespace = :namespace AND doc_type = 'memory' AND valid_to IS NULL
      AND content_hash = ANY(CAST(:hashes AS text[]))
    """
)


def _parts(rows: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """`rows` in order, in runs whose contents add up to at most INSERT_CHARS characters (a
    longer row alone)."""
    part: list[dict[str, Any]] = []
    size = 0
    for row in rows:
        length = len(row["content"])
        if part and size + length > INSERT_CHARS:
            yield part
            part, size = [], 0
        part.append(row)
        size += length
    if part:
        yield part


def _this_edge(rec: Record, src: str | None, tgt: str | None) -> list[ColumnElement[bool]]:
    """The rows of the edge `rec` names between `src` and `tgt`, every version of it."""
    return [
        Edge.namespace == rec["namespace"],
        Edge.source_kind == "chunk",
        Edge.target_kind == "chunk",
        Edge.source_id == src,
        Edge.target_id == tgt,
        Edge.relation == rec["type"],
    ]


def moment(value: str) -> datetime:
    return datetime.fromisoformat(timestamp(value))


def _fields(row: Chunk) -> dict[str, Any]:
    return {
        "type": row.memory_type,
        "content": row.content,
        "importance": float(row.importance),
        "confidence": float(row.confidence),
        "tags": sorted(row.tags or []),
        "lifecycle": row.lifecycle,
        "stage": row.stage,
        "pinned": bool(row.pinned),
        "metadata": canonical(row.meta or {}),
        "happened": None if row.occurred_at is None else timestamp(row.occurred_at),
        "created": timestamp(row.created_at),
    }


def _columns(rec: Record) -> dict[str, Any]:
    return {
        "content": rec["content"],
        "content_hash": rec["content_hash"],
        "token_count": count_tokens(rec["content"]),
        "memory_type": rec["type"],
        "importance": rec["importance"],
        "confidence": rec["confidence"],
        "tags": rec["tags"],
        "meta": rec["metadata"],
        "lifecycle": rec["lifecycle"],
        "stage": rec["stage"],
        "pinned": rec["pinned"],
        "occurred_at": None if rec["happened"] is None else moment(rec["happened"]),
    }


@dataclass
class _Batch:
    """A checked batch waiting to be written: its embedding runs while the one before is."""

    new: list[Record]
    changed: list[tuple[Record, dict[str, Any]]]  # the record and the live row's fields
    vectors: Future[np.ndarray] | None


ContentKey = tuple[str, str]  # (namespace, content hash)


def _rewrites(rec: Record, old: dict[str, Any]) -> bool:
    """An edit that changes the text: it takes a new content hash and needs a new vector."""
    return bool(old["content"] != rec["content"])


class Plan:
    """Applies (or, in a dry run, only counts) an import, batch by batch, in one session.

    Embedding is pipelined: batch k+1 is checked and handed to one embedding thread before
    batch k is written, so the model works while PostgreSQL inserts (and indexes) the rows
    before — the import runs near the model's speed instead of at embedding + writes. Use as
    a context manager and call `finish()` before anything that needs every memory written.
    """

    def __init__(
        self, session: Session, dry_run: bool, report: Report, halt_on_problem: bool = False
    ) -> None:
        self.session, self.dry_run, self.report = session, dry_run, report
        # Without partial, a problem only the database shows (an edit to a text another
        # memory holds) undoes the import: from then on it only counts (and lists problems),
        # never embedding or writing what is rolled back.
        self.halt_on_problem, self._problems_before = halt_on_problem, len(report.problems)
        self.same_as: dict[str, str] = {}  # a file's id → the id its content is stored under
        self.namespaces: set[str] = set()
        self._embedding = ThreadPoolExecutor(1, thread_name_prefix="memsys-import-embed")
        self._waiting: _Batch | None = None
        # What the batches checked but not yet written will change (in a dry run: every
        # batch before): content they take, and content their edits move away from a row.
        self._claimed: dict[ContentKey, str] = {}
        self._released: dict[ContentKey, str] = {}
        self.written = 0  # new memories inserted so far

    def __enter__(self) -> Plan:
        return self

    def __exit__(self, *exc: object) -> None:
        self._embedding.shutdown(wait=True, cancel_futures=True)

    def _problem(self, rec: Record, key: str, message: str) -> None:
        """A problem only the database shows (pass 1 checked the file alone)."""
        line = rec.at(key) if isinstance(rec, Located) else None
        self.report.problems.append(Problem(str(getattr(rec, "source", rec["id"])), line, message))

    def _namespace(self, name: str) -> None:
        if name not in self.namespaces and not self.dry_run:
            namespaces.ensure(self.session, name)
        self.namespaces.add(name)

    @property
    def halted(self) -> bool:
        return self.halt_on_problem and len(self.report.problems) > self._problems_before

    def memories(self, batch: list[Record]) -> None:
        self.dry_run = self.dry_run or self.halted  # halted: counts from here, writes nothing
        chunks = list(
            self.session.scalars(
                select(Chunk).where(
                    Chunk.doc_type == "memory",
                    Chunk.valid_to.is_(None),
                    Chunk.id.in_([r["id"] for r in batch]),
                )
            )
        )
        # An aged memory is compared by its full text, as export writes it (from history).
        texts = full_texts(
            self.session, [(c.namespace, c.id, c.content) for c in chunks if c.stage in AGED]
        )
        rows = {
            c.id: {
                **_fields(c),
                "content": texts.get((c.namespace, c.id), c.content),
                "content_hash": c.content_hash,
            }
            for c in chunks
        }
        self.session.expunge_all()  # keep the identity map from growing with the import
        new, changed = [], []
        for rec in batch:
            fields = rows.get(rec["id"])
            if fields is not None and rec.pop(HAPPENED_UNKNOWN, False):
                rec["happened"] = fields["happened"]  # an older file's silence changes nothing
            if fields is None:
                new.append(rec)
            elif rec.get(UNEDITED) and fields["content"] == rec["content"]:
                # The file as memsys wrote it, and the text the database holds: what differs
                # (confidence, stage, …) the database learned since. Another text — another
                # database with the same ids, the index synced along — is compared as usual.
                self.report.memories.unchanged += 1
            elif fields["created"] != rec["created"]:  # a version keeps its memory's birth
                self._problem(
                    rec,
                    "created",
                    f"created: {rec['created']} is not when {rec['id']} was created "
                    f"({fields['created']}), and that cannot change: put it back",
                )
            elif any(not same(fields[k], rec[k]) for k in VERSIONED):
                changed.append((rec, fields))
            else:
                self.report.memories.unchanged += 1
        claims: dict[ContentKey, str] = {}
        stored = self._stored(new + [rec for rec, old in changed if _rewrites(rec, old)])
        new = self._without_duplicates(new, stored, claims)
        changed = self._not_taken(changed, stored, claims)
        self.report.memories.new += len(new)
        self.report.memories.changed += len(changed)
        released = {
            (rec["namespace"], old["content_hash"]): rec["id"]
            for rec, old in changed
            if _rewrites(rec, old)
        }
        if self.dry_run:  # nothing is written: every batch before stays pending
            self._claimed.update(claims)
            self._released.update(released)
            return
        to_embed = [r["content"] for r in new] + [
            r["content"] for r, old in changed if _rewrites(r, old)
        ]
        vectors = self._embedding.submit(get_embedder().embed, to_embed) if to_embed else None
        self._write_waiting()
        self._waiting = _Batch(new, changed, vectors)
        self._claimed, self._released = claims, released

    def finish(self) -> None:
        """Write the last batch: after this every memory of the snapshot is in the session."""
        self._write_waiting()

    def _write_waiting(self) -> None:
        batch, self._waiting = self._waiting, None
        if batch is None or self.halted:  # halted: what it would write is rolled back
            return
        vectors = iter(batch.vectors.result() if batch.vectors is not None else [])
        self._insert(batch.new, vectors)
        for rec, old in batch.changed:
            self._version(rec, old, next(vectors) if _rewrites(rec, old) else None)
        self.session.flush()
        self.session.expunge_all()

    def _holder(self, key: ContentKey, stored: str | None) -> str | None:
        """Who holds this content once the batches checked before are written: the row the
        database has now (unless one of their edits moves it away), or a record of theirs."""
        if stored is not None and self._released.get(key) == stored:
            stored = None
        return stored or self._claimed.get(key)

    def _stored(self, records: list[Record]) -> dict[ContentKey, str]:
        """The live memory that holds each record's content now: one query per namespace."""
        by_ns: dict[str, set[str]] = {}
        aliases: dict[str, str] = {}  # the digest a row written before holds → the text's
        for rec in records:
            digest, *earlier = content_hashes(rec["content"])
            by_ns.setdefault(rec["namespace"], set()).update([digest, *earlier])
            aliases.update(dict.fromkeys(earlier, digest))
        found: dict[ContentKey, str] = {}
        for ns, hashes in by_ns.items():
            rows = self.session.execute(_HOLDER, {"namespace": ns, "hashes": sorted(hashes)})
            for held, holder in sorted(rows.tuples(), key=lambda row: row[0] in aliases):
                digest = aliases.get(str(held), str(held))
                found.setdefault((ns, digest), holder)  # a row of the text's own digest first
        return found

    def _without_duplicates(
        self, new: list[Record], stored: dict[ContentKey, str], claims: dict[ContentKey, str]
    ) -> list[Record]:
        """New records whose content is stored under another live id (or taken by a record
        checked before and not yet written) are duplicates; the rest claim their content."""
        kept: list[Record] = []
        for rec in new:
            key = (rec["namespace"], rec["content_hash"])
            holder = self._holder(key, stored.get(key)) or claims.get(key)
            if holder is not None:
                self.same_as[rec["id"]] = holder
                self.report.memories.duplicate += 1
            else:
                claims[key] = rec["id"]
                kept.append(rec)
        return kept

    def _not_taken(
        self,
        changed: list[tuple[Record, dict[str, Any]]],
        stored: dict[ContentKey, str],
        claims: dict[ContentKey, str],
    ) -> list[tuple[Record, dict[str, Any]]]:
        """Edits whose new content another live memory of the namespace already holds (or a
        record checked before claims) are problems, left out: one live memory holds a text
        (the unique live content hash), and dropping the edit as a duplicate lost it."""
        kept = []
        for rec, old in changed:
            if _rewrites(rec, old):
                key = (rec["namespace"], rec["content_hash"])
                holder = self._holder(key, stored.get(key)) or claims.get(key)
                if holder is not None and holder != rec["id"]:
                    self._problem(
                        rec,
                        "content",
                        f"the edit gives {rec['id']} the text memory {holder} holds, and one "
                        "memory holds a text: change it, or forget one of the two",
                    )
                    continue
                claims[key] = rec["id"]
            kept.append((rec, old))
        return kept

    def _insert(self, new: list[Record], vectors: Any) -> None:
        if not new:
            return
        rows = []
        for rec in new:
            self._namespace(rec["namespace"])
            rows.append(
                {
                    "namespace": rec["namespace"],
                    "id": rec["id"],
                    "embedding": dense.literal(next(vectors)),
                    **_columns(rec),
                    "occurred_at": rec["happened"],  # as text, like the times below
                    "created_at": moment(rec["created"]).isoformat(),
                    "updated_at": moment(rec["updated"]).isoformat(),
                }
            )
        # One statement per batch, not one per row: the term-statistics triggers are per
        # statement, and a long import's thousands of updates of the same lexemes in one
        # transaction slowed every later insert.
        for part in _parts(rows):
            self.session.execute(_INSERT, {"rows": json_text(part)})
        self.written += len(new)
        by_ns: dict[str, list[tuple[str, str]]] = {}
        for rec in new:
            by_ns.setdefault(rec["namespace"], []).append((rec["id"], rec["content"]))
        for ns, pairs in by_ns.items():
            mentions.link(self.session, ns, pairs)
        self._events(
            [(r["namespace"], "create", r["id"], {"content_hash": r["content_hash"]}) for r in new]
        )

    def _version(self, rec: Record, old: dict[str, Any], vector: Any) -> None:
        """The old fields stay as a closed copy; the live row (same id) takes the new ones."""
        copy = ids.new_id(ids.MEMORY)
        ns = rec["namespace"]
        self.session.execute(_COPY, {"copy": copy, "namespace": ns, "id": rec["id"]})
        changes = _columns(rec)
        if vector is not None:
            changes["embedding"] = vector
        self.session.execute(
            update(Chunk)
            .where(Chunk.namespace == ns, Chunk.id == rec["id"], Chunk.valid_to.is_(None))
            .values(**changes, updated_at=func.now(), valid_from=func.now())
        )
        if vector is not None:  # new text: the names the old one made close with the copy
            self.session.execute(
                update(Edge)
                .where(
                    Edge.namespace == ns,
                    Edge.source_kind == "chunk",
                    Edge.source_id == rec["id"],
                    Edge.relation == mentions.MENTIONS,
                    Edge.valid_to.is_(None),
                )
                .values(source_id=copy, valid_to=func.now(), expired_at=func.now())
            )
            mentions.link(self.session, ns, [(rec["id"], rec["content"])])
        self.session.execute(
            insert(Edge).values(
                namespace=ns,
                source_kind="chunk",
                source_id=rec["id"],
                target_kind="chunk",
                target_id=copy,
                relation="supersedes",
                context=EDITED_COPY,
            )
        )
        fields = sorted(k for k in VERSIONED if not same(old[k], rec[k]))
        self._events([(ns, "edit", rec["id"], {"previous": copy, "fields": fields})])
        self.report.versions.append({"id": rec["id"], "previous": copy})

    def _events(self, items: list[tuple[str, str, str, dict[str, Any]]]) -> None:
        self.session.execute(
            insert(Event),
            [
                {
                    "namespace": ns,
                    "event_type": kind,
                    "operation": OPERATION,
                    "subject_kind": "memory",
                    "subject_id": subject,
                    "payload": payload,
                }
                for ns, kind, subject, payload in items
            ],
        )

    def edges(self, batch: list[Record]) -> None:
        self.dry_run = self.dry_run or self.halted
        for rec in batch:
            src = self.same_as.get(rec["from_id"], rec["from_id"])
            tgt = self.same_as.get(rec["to_id"], rec["to_id"])
            this = _this_edge(rec, src, tgt)
            live = self.session.execute(
                select(Edge.id, Edge.weight, Edge.context).where(*this, Edge.valid_to.is_(None))
            ).first()
            if live is not None and (live.weight, live.context or None) == (
                rec["strength"],
                rec["context"],
            ):
                self.report.edges.unchanged += 1
                continue
            if rec.get(UNEDITED) and any(
                (old.weight, old.context or None) == (rec["strength"], rec["context"])
                for old in self.session.execute(select(Edge.weight, Edge.context).where(*this))
            ):
                # The edge as memsys wrote it, as this database held it once: it changed or
                # deleted the edge since, and that stands. One it never held applies.
                self.report.edges.unchanged += 1
                continue
            counts = self.report.edges
            counts.changed, counts.new = (
                (counts.changed + 1, counts.new) if live else (counts.changed, counts.new + 1)
            )
            if self.dry_run:
                continue
            if live is not None:  # closed, not overwritten: the old weight stays readable
                self.session.execute(
                    update(Edge)
                    .where(Edge.namespace == rec["namespace"], Edge.id == live.id)
                    .values(valid_to=func.now(), expired_at=func.now())
                )
            self.session.execute(
                insert(Edge).values(
                    namespace=rec["namespace"],
                    source_kind="chunk",
                    source_id=src,
                    target_kind="chunk",
                    target_id=tgt,
                    relation=rec["type"],
                    weight=rec["strength"],
                    context=rec["context"],
                    created_at=moment(rec["created"]),
                )
            )

    def preference(self, rec: Record) -> None:
        where = (Preference.namespace == rec["namespace"], Preference.key == rec["key"])
        row = self.session.execute(
            select(Preference.value, Preference.lifecycle).where(
                *where, Preference.valid_to.is_(None)
            )
        ).first()
        if row is not None and same(row.value, rec["value"]) and row.lifecycle == rec["lifecycle"]:
            self.report.preferences.unchanged += 1
            return
        if rec.get(UNEDITED) and any(
            same(old.value, rec["value"]) and old.lifecycle == rec["lifecycle"]
            for old in self.session.execute(
                select(Preference.value, Preference.lifecycle).where(*where)
            )
        ):
            # The line as memsys wrote it, and a value this database held: it set or deleted
            # the preference since, and that stands (re-importing an untouched vault never
            # reverts it). A value it never held (another database's vault) applies.
            self.report.preferences.unchanged += 1
            return
        if row is None:
            self.report.preferences.new += 1
        else:
            self.report.preferences.changed += 1
        if not self.dry_run:
            params = PreferenceRestoreIn(
                key=rec["key"],
                value=rec["value"],
                namespace=rec["namespace"],
                lifecycle=rec["lifecycle"],
            )
            preferences.set_value(self.session, params)
