"""Versioned facts: fact_set supersedes the live version of (entity, attribute) — a semver
bump, a `supersedes` link and edge (new → old), the old version closed at the new one's
valid_from together with the edges that hang on it — and keeps every version readable
(fact_history, fact_get with as_of). Nothing is deleted. Writers of one (entity, attribute)
take turns; the live unique index backs that up."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import func, or_, select, update
from sqlalchemy.orm import Session

from memsys import ids, secretscan, tenancy
from memsys.config import get_settings
from memsys.db import clock, take_turns
from memsys.errors import InvalidInput, NotFound
from memsys.models import Edge, Entity, Fact
from memsys.schemas.facts import (
    FactGetIn,
    FactHistoryIn,
    FactOut,
    FactSetIn,
    FactSetOut,
    FactsOut,
    FactVerifyIn,
)
from memsys.services import events, knowledge, namespaces
from memsys.services.observation_links import entity_key

SUPERSEDES = "supersedes"


def bump(version: str, part: str) -> str:
    major, minor, patch = (int(x) for x in version.split("."))
    if part == "major":
        return f"{major + 1}.0.0"
    if part == "minor":
        return f"{major}.{minor + 1}.0"
    return f"{major}.{minor}.{patch + 1}"


def _out(fact: Fact, entity: str) -> FactOut:
    return FactOut(
        fact_id=fact.id,
        entity=entity,
        attribute=fact.attribute,
        content=fact.content,
        version=fact.version,
        supersedes_id=fact.supersedes_id,
        confidence=fact.confidence,
        source_uri=fact.source_uri,
        verified=fact.verified,
        verified_at=fact.verified_at,
        valid_from=fact.valid_from,
        valid_to=fact.valid_to,
    )


def _ns(params: object) -> str:
    return str(getattr(params, "namespace", None) or get_settings().graph_namespace)


def _standing(session: Session, ns: str, name: str, at: datetime | None) -> Entity:
    """The entity whose facts a read of `name` means: as of `at`, the first of the name not
    deleted by then (one deleted since, or made again since, answers for its own time);
    without `at` the live one, else the last deleted (its history stays readable)."""
    stmt = select(Entity).where(Entity.namespace == ns, Entity.key == entity_key(name))
    if at is not None:
        stmt = stmt.where(or_(Entity.valid_to.is_(None), Entity.valid_to > at))
        stmt = stmt.order_by(Entity.created_at, Entity.id)
    else:
        stmt = stmt.order_by(Entity.valid_to.desc().nulls_first(), Entity.id)
    found = session.scalars(stmt.limit(1)).first()
    if found is None:
        raise NotFound(f"Entity with name {name} not found")
    return found


def set_fact(session: Session, params: FactSetIn) -> FactSetOut:
    """Record a fact; a different statement about the same attribute supersedes the live one."""
    ns = _ns(params)
    namespaces.ensure(session, ns)
    entity, _ = knowledge.upsert_entity(session, ns, params.entity, params.entity_type)
    take_turns(session, ns, "fact", entity.id, params.attribute)
    old = session.scalars(
        select(Fact).where(
            Fact.namespace == ns,
            Fact.entity_id == entity.id,
            Fact.attribute == params.attribute,
            Fact.valid_to.is_(None),
        )
    ).first()
    flagged = secretscan.warnings(params.content)
    if old is not None and old.content == params.content:
        return FactSetOut(
            fact=_out(old, entity.name), created=False, superseded=None, warnings=flagged
        )
    # the clock after the turn is ours: a transaction that waited starts after the one before
    start = params.valid_from or clock(session)
    if old is not None and start <= old.valid_from:
        raise InvalidInput(
            f"valid_from {start.isoformat()} is not after the live version's "
            f"({old.valid_from.isoformat()}): a new version starts after the one it replaces"
        )
    fact = Fact(
        namespace=ns,
        id=ids.new_id(ids.FACT),
        entity_id=entity.id,
        attribute=params.attribute,
        content=params.content,
        source_uri=params.source_uri,
        confidence=params.confidence,
        version="1.0.0" if old is None else bump(old.version, params.bump),
        supersedes_id=None if old is None else old.id,
        verified=params.verified,
        verified_at=datetime.now(UTC) if params.verified else None,
        valid_from=start,
    )
    if old is not None:
        old.valid_to = start
        session.flush()  # the old version leaves the live index before the new one enters
        session.execute(
            update(Edge)
            .where(
                Edge.namespace == ns,
                Edge.valid_to.is_(None),
                or_(Edge.source_id == old.id, Edge.target_id == old.id),
            )
            .values(valid_to=start, expired_at=func.now())
        )
    session.add(fact)
    session.flush()
    if old is not None:
        session.add(
            Edge(
                namespace=ns,
                source_kind="fact",
                source_id=fact.id,
                target_kind="fact",
                target_id=old.id,
                relation=SUPERSEDES,
                valid_from=start,
            )
        )
    events.record(
        session,
        namespace=ns,
        event_type="create" if old is None else "edit",
        operation="fact_set",
        subject_kind="fact",
        subject_id=fact.id,
        payload={"entity": entity.name, "attribute": params.attribute, "version": fact.version},
    )
    session.flush()
    superseded = None if old is None else _out(old, entity.name)
    return FactSetOut(
        fact=_out(fact, entity.name), created=True, superseded=superseded, warnings=flagged
    )


def _facts(
    session: Session, ns: str, name: str, attribute: str | None, at: datetime | None = None
) -> tuple[Entity, list[Fact]]:
    namespaces.require(session, ns)
    entity = _standing(session, ns, name, at)
    stmt = select(Fact).where(Fact.namespace == ns, Fact.entity_id == entity.id)
    if attribute is not None:
        stmt = stmt.where(Fact.attribute == attribute)
    return entity, list(session.scalars(stmt.order_by(Fact.attribute, Fact.valid_from)))


def get_facts(session: Session, params: FactGetIn) -> FactsOut:
    """The versions that were live at as_of (default now), one per attribute."""
    at = params.as_of or datetime.now(UTC)
    entity, rows = _facts(session, _ns(params), params.entity, params.attribute, at)
    live = [f for f in rows if f.valid_from <= at and (f.valid_to is None or f.valid_to > at)]
    return FactsOut(facts=[_out(f, entity.name) for f in live])


def history(session: Session, params: FactHistoryIn) -> FactsOut:
    """Every version, oldest first per attribute."""
    entity, rows = _facts(session, _ns(params), params.entity, params.attribute)
    return FactsOut(facts=[_out(f, entity.name) for f in rows])


def verify(session: Session, params: FactVerifyIn) -> FactsOut:
    """Mark one version verified (now) or not."""
    ns = _ns(params)
    tenancy.require_write(ns)  # else the lock below misses a fact the caller can read
    fact = session.get(Fact, (ns, params.fact_id), with_for_update=True)
    if fact is None:
        raise NotFound(f"Fact not found: {params.fact_id}")
    fact.verified = params.verified
    fact.verified_at = datetime.now(UTC) if params.verified else None
    session.flush()
    name = session.scalar(
        select(Entity.name).where(Entity.namespace == ns, Entity.id == fact.entity_id)
    )
    return FactsOut(facts=[_out(fact, name or "")])
