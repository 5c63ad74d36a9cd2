"""Preferences: versioned KV. Each set closes the current row and adds the next version."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from memsys import secretscan
from memsys.db import clock, take_turns
from memsys.errors import NotFound
from memsys.jsonvalue import same
from memsys.models import Preference
from memsys.schemas import (
    PreferenceDeleteOut,
    PreferenceGetIn,
    PreferenceHistoryOut,
    PreferenceKeyIn,
    PreferenceListIn,
    PreferenceListOut,
    PreferenceOut,
    PreferenceSetIn,
    PreferenceSetOut,
)
from memsys.services import events, namespaces


def _utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _out(row: Preference) -> PreferenceOut:
    return PreferenceOut(
        key=row.key,
        value=row.value,
        namespace=row.namespace,
        lifecycle=row.lifecycle,
        version=row.version,
        valid_from=row.valid_from,
        valid_to=row.valid_to,
    )


def _at(stmt, as_of: datetime | None):  # type: ignore[no-untyped-def]
    if as_of is None:
        return stmt.where(Preference.valid_to.is_(None))
    moment = _utc(as_of)
    return stmt.where(
        Preference.valid_from <= moment,
        (Preference.valid_to.is_(None)) | (Preference.valid_to > moment),
    )


def set_value(session: Session, params: PreferenceSetIn) -> PreferenceSetOut:
    """Set a preference; an unchanged value writes nothing and reports changed=false."""
    namespaces.ensure(session, params.namespace)
    # Serialise writers of one key so versions never collide.
    take_turns(session, params.namespace, params.key)
    current = session.scalars(
        _at(select(Preference), None).where(
            Preference.namespace == params.namespace, Preference.key == params.key
        )
    ).first()
    flagged = secretscan.warnings(secretscan.value_text(params.value), "value")
    unchanged = (
        current is not None
        and same(current.value, params.value)  # true is no 1, 1e300 is the 10^300 jsonb kept
        and current.lifecycle == params.lifecycle
    )
    if unchanged:
        assert current is not None
        return PreferenceSetOut(**_out(current).model_dump(), changed=False, warnings=flagged)
    last = session.scalar(
        select(func.max(Preference.version)).where(
            Preference.namespace == params.namespace, Preference.key == params.key
        )
    )
    at = clock(session)  # its turn is taken
    if current is not None:
        current.valid_to = at
        session.flush()
    row = Preference(
        namespace=params.namespace,
        key=params.key,
        version=(last or 0) + 1,
        value=params.value,
        lifecycle=params.lifecycle,
        valid_from=at,
    )
    session.add(row)
    session.flush()
    session.refresh(row)
    events.record(
        session,
        namespace=params.namespace,
        event_type="edit" if current is not None else "create",
        operation="preference_set",
        subject_kind="preference",
        subject_id=params.key,
        payload={"version": row.version},
    )
    return PreferenceSetOut(**_out(row).model_dump(), changed=True, warnings=flagged)


def get(session: Session, params: PreferenceGetIn) -> PreferenceOut:
    """The current value, or the value as of a moment in time."""
    namespaces.require(session, params.namespace)
    row = session.scalars(
        _at(select(Preference), params.as_of).where(
            Preference.namespace == params.namespace, Preference.key == params.key
        )
    ).first()
    if row is None:
        when = f" as of {_utc(params.as_of).isoformat()}" if params.as_of else ""
        raise NotFound(f"Preference not found: {params.key} in namespace {params.namespace}{when}")
    return _out(row)


def list_values(session: Session, params: PreferenceListIn) -> PreferenceListOut:
    namespaces.require(session, params.namespace)
    stmt = _at(select(Preference), params.as_of).where(Preference.namespace == params.namespace)
    if params.lifecycle:
        stmt = stmt.where(Preference.lifecycle == params.lifecycle)
    rows = session.scalars(stmt.order_by(Preference.key)).all()
    return PreferenceListOut(
        preferences=[_out(r) for r in rows],
        total=len(rows),
        namespace=params.namespace,
        as_of=params.as_of,
    )


def delete(session: Session, params: PreferenceKeyIn) -> PreferenceDeleteOut:
    """Close the current value; its history stays (preference_history, as_of reads)."""
    namespaces.require(session, params.namespace)
    take_turns(session, params.namespace, params.key)
    current = session.scalars(
        _at(select(Preference), None).where(
            Preference.namespace == params.namespace, Preference.key == params.key
        )
    ).first()
    if current is None:
        raise NotFound(f"Preference not found: {params.key} in namespace {params.namespace}")
    current.valid_to = clock(session)  # its turn is taken
    session.flush()
    events.record(
        session,
        namespace=params.namespace,
        event_type="delete",
        operation="preference_delete",
        subject_kind="preference",
        subject_id=params.key,
        payload={"version": current.version},
    )
    return PreferenceDeleteOut(key=params.key, namespace=params.namespace, version=current.version)


def history(session: Session, params: PreferenceKeyIn) -> PreferenceHistoryOut:
    namespaces.require(session, params.namespace)
    rows = session.scalars(
        select(Preference)
        .where(Preference.namespace == params.namespace, Preference.key == params.key)
        .order_by(Preference.version)
    ).all()
    if not rows:
        raise NotFound(f"Preference not found: {params.key} in namespace {params.namespace}")
    return PreferenceHistoryOut(
        key=params.key, namespace=params.namespace, versions=[_out(r) for r in rows]
    )
