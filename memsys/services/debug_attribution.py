"""Error attribution and monitoring (FEATURES F3, F4; S004 ErrorAttribution, alerts).

A wrong answer is a context bug when the memories it needed never reached the output — and
the expected ids say where each was lost:
- wrong_store_queried: it lives in another namespace, or is a document where the tool
  searched memories only (or the reverse);
- wrong_mode_detected: the caller says the query's mode was other than the one detected;
- wrong_lifecycle_filter: it was closed (forgotten, superseded) before the query, or the
  call's filters (type, importance, confidence, source file) excluded it;
- retrieval_ranking_error: it was live and in scope, yet no channel ranked it within its pool,
  or fusion ranked it below the cut, or the tool's own cut left it out.
A trace whose call raised is a system error. A wrong answer whose expected memories were all
returned — or one with no expected ids and nothing else to go on (S004's default) — is a
model bug.
"""

from __future__ import annotations

from datetime import datetime
from fnmatch import fnmatchcase
from typing import Any

from sqlalchemy import select, text, tuple_
from sqlalchemy.orm import Session

from memsys import tenancy
from memsys.config import get_settings
from memsys.models import Chunk, Preference, QueryTrace
from memsys.models.log import CONTEXT_BUGS, ERROR_TYPES
from memsys.models.token import ApiToken
from memsys.retrieval import trace as shape
from memsys.schemas.debug_replay import (
    Alert,
    AlertsIn,
    AlertsOut,
    ErrorAttributionIn,
    ErrorAttributionOut,
)
from memsys.services.query import CHUNK_STORES, PREFERENCE_NAMESPACE

SYSTEM_ERROR, CONTEXT_BUG, MODEL_BUG = "system_error", "context_bug", "model_bug"
WRONG_STORE, WRONG_MODE, WRONG_LIFECYCLE, RANKING = CONTEXT_BUGS


def _excluded_by(chunk: Chunk, name: str, value: Any) -> bool:
    """Does the call's filter `name` (filters.FILTER_SQL) leave `chunk` out?"""
    if name in ("memory_type", "source_file"):
        return bool(getattr(chunk, name) != value)
    if name in ("min_importance", "min_confidence"):
        return bool(getattr(chunk, name.removeprefix("min_")) < value)
    return False


def record_of(row: QueryTrace) -> dict[str, Any]:
    """A trace row's fields as the shape functions (memsys.retrieval.trace) read them."""
    return {
        "operation": row.operation,
        "query": row.query,
        "user_context": row.user_context,
        "filters": row.filters,
        "mode_detected": row.mode_detected,
        "mode_confidence": row.mode_confidence,
        "stores_queried": row.stores_queried,
        "routing_logic": row.routing_logic,
        "channels": row.channels,
        "candidates": row.candidates,
        "fusion": row.fusion,
        "retrieved": row.retrieved,
        "timings": row.timings,
        "verification": row.verification,
        "output": row.output,
        "total_latency_ms": row.total_latency_ms,
        "error": row.error,
        "error_type": row.error_type,
        "error_subtype": row.error_subtype,
    }


def asked_as_of(row: QueryTrace) -> datetime | None:
    """The `as_of` the traced call asked for itself (a view of the past), if any."""
    given = (row.fusion.get("input") or {}).get("as_of")
    try:
        return datetime.fromisoformat(given) if isinstance(given, str) else None
    except ValueError:
        return None


def token_scope(session: Session, row: QueryTrace) -> tenancy.Scope | None:
    """The scope a scoped token's call over all its namespaces ran under (its trace is
    logged under '*@<token id>'): the caller's own when it is that token, else (an admin)
    read from api_token. None for any other trace."""
    if not row.namespace.startswith("*@"):
        return None
    token_id = row.namespace.removeprefix("*@")
    caller = tenancy.current()
    if caller.token_id == token_id:
        return caller
    token = session.get(ApiToken, token_id) if caller.admin else None
    if token is None:
        return None
    patterns = tuple(token.namespaces)
    write = patterns if token.mode == "read-write" else ()
    return tenancy.Scope(read=patterns, write=write, token_id=token.id)


def _versions(session: Session, memory_id: str) -> list[Chunk]:
    return list(session.scalars(select(Chunk).where(Chunk.id == memory_id)))


PREFERENCE_ITEM = "pref:"  # memory_query's id of a preference item: pref:<namespace>:<key>


def preference_versions(session: Session, item_id: str) -> list[Preference]:
    """The versions of the preference a memory_query item id names, oldest first (a
    namespace and a key may both hold ':', so every split is tried); [] for any other id."""
    rest = item_id.removeprefix(PREFERENCE_ITEM)
    if rest == item_id:
        return []
    splits = [(rest[:i], rest[i + 1 :]) for i, c in enumerate(rest) if c == ":"]
    if not splits:
        return []
    named = tuple_(Preference.namespace, Preference.key).in_(splits)
    return list(session.scalars(select(Preference).where(named).order_by(Preference.version)))


def _seen_at(row: QueryTrace) -> tuple[datetime, str]:
    """When the rows the call saw were valid: its own as_of, else when it ran."""
    asked = asked_as_of(row)
    if asked:
        return asked, "the time the query asked for (as_of)"
    return row.created_at, "the query ran"


def _preference_scope(session: Session, row: QueryTrace, item_id: str) -> dict[str, Any]:
    """`scope` of a preference item of memory_query: the kv store queried, the namespace
    (its own or the user's `global`), a version valid when the call saw the rows."""
    versions = preference_versions(session, item_id)
    if not versions:
        return {"memory": None, "bug": None, "reason": "no such preference (unknown id)"}
    first, last = versions[0], versions[-1]
    memory = {
        "namespace": last.namespace,
        "doc_type": "preference",
        "memory_type": None,
        "valid_from": first.valid_from.isoformat(),
        "valid_to": last.valid_to.isoformat() if last.valid_to else None,
    }
    stores = row.stores_queried or []
    if "kv" not in stores:
        searched = ", ".join(stores) or "no store"
        reason = f"it is a preference (the kv store); the query's router searched {searched}"
        return {"memory": memory, "bug": WRONG_STORE, "reason": reason}
    wanted_ns = (row.filters or {}).get("namespace")
    if last.namespace not in (wanted_ns, PREFERENCE_NAMESPACE):
        searched = f"{wanted_ns} and {PREFERENCE_NAMESPACE}" if wanted_ns else PREFERENCE_NAMESPACE
        reason = (
            f"it lives in namespace {last.namespace}; the query read the preferences of {searched}"
        )
        return {"memory": memory, "bug": WRONG_STORE, "reason": reason}
    seen, when = _seen_at(row)
    if first.valid_from > seen:
        return {"memory": memory, "bug": None, "reason": f"it was set after {when}", "later": True}
    if not any(
        v.valid_from <= seen and (v.valid_to is None or v.valid_to > seen) for v in versions
    ):
        reason = f"it was deleted before {when}"
        return {"memory": memory, "bug": WRONG_LIFECYCLE, "reason": reason}
    return {"memory": memory, "bug": None, "reason": None}


def scope(session: Session, row: QueryTrace, memory_id: str) -> dict[str, Any]:
    """Could the traced query have found `memory_id` at all? Its namespace, kind, validity at
    the trace's time and the call's filters decide; `bug` names the context bug if not."""
    if memory_id.startswith(PREFERENCE_ITEM) and row.operation == "memory_query":
        return _preference_scope(session, row, memory_id)
    versions = _versions(session, memory_id)
    if not versions:
        return {"memory": None, "bug": None, "reason": "no such memory (unknown id, or purged)"}
    chunk = versions[0]
    memory = {
        "namespace": chunk.namespace,
        "doc_type": chunk.doc_type,
        "memory_type": chunk.memory_type,
        "valid_from": chunk.valid_from.isoformat(),
        "valid_to": chunk.valid_to.isoformat() if chunk.valid_to else None,
    }
    request = (row.fusion.get("request") or {}).get("filters") or row.filters or {}
    wanted_ns = request.get("namespace")
    if wanted_ns and chunk.namespace != wanted_ns:
        reason = f"it lives in namespace {chunk.namespace}; the query searched {wanted_ns}"
        return {"memory": memory, "bug": WRONG_STORE, "reason": reason}
    token = None if wanted_ns else token_scope(session, row)
    if token is not None and not any(fnmatchcase(chunk.namespace, p) for p in token.read):
        searched = ", ".join(token.read)
        reason = f"it lives in namespace {chunk.namespace}; the query searched {searched}"
        return {"memory": memory, "bug": WRONG_STORE, "reason": reason}
    kind = request.get("doc_type")
    if kind and chunk.doc_type != kind:
        reason = f"it is a {chunk.doc_type}; the query searched {kind}s only"
        return {"memory": memory, "bug": WRONG_STORE, "reason": reason}
    seen, when = _seen_at(row)  # the rows the call saw: valid at its own as_of, else then
    if chunk.valid_from > seen:
        reason = f"it was stored after {when}"
        return {"memory": memory, "bug": None, "reason": reason, "later": True}
    stores = row.stores_queried or []
    if row.operation == "memory_query" and not any(s in CHUNK_STORES for s in stores):
        # The router answered from preferences or entities alone: no retrieval ran at all.
        reason = (
            f"it is a {chunk.doc_type}, which retrieval finds; the query's router searched "
            f"{', '.join(stores) or 'no store'} only"
        )
        return {"memory": memory, "bug": WRONG_STORE, "reason": reason}
    if chunk.valid_to is not None and chunk.valid_to <= seen:
        reason = f"it was closed (forgotten or superseded) before {when}"
        return {"memory": memory, "bug": WRONG_LIFECYCLE, "reason": reason}
    for name, value in sorted(request.items()):
        if value is not None and _excluded_by(chunk, name, value):
            reason = f"the call's filter {name}={value} excluded it"
            return {"memory": memory, "bug": WRONG_LIFECYCLE, "reason": reason}
    return {"memory": memory, "bug": None, "reason": None}


def where_lost(session: Session, row: QueryTrace, memory_id: str) -> dict[str, Any]:
    """`scope` first; for a memory in scope, where the pipeline lost it (or its rank)."""
    found = shape.locate(record_of(row), memory_id)
    checked = scope(session, row, memory_id)
    found["memory"] = checked["memory"]
    structured = (row.output or {}).get("structured")  # memory_query's kv items (since 11-26)
    if memory_id.startswith(PREFERENCE_ITEM) and structured is not None:
        if found["stage"] != "returned" and memory_id in structured:
            found["stage"] = "output"
            found["reason"] = (
                "the kv store found it, but the tool's own cut (token budget or core size) "
                "left it out"
            )
        elif found["stage"] != "returned":
            found["reason"] = "the kv store did not find it: the query names no part of its key"
    if found["stage"] != "returned" and (checked["reason"] is not None):
        found["stage"], found["reason"] = "scope", checked["reason"]
    found["bug"] = checked["bug"]
    if found["bug"] is None and found["stage"] not in ("returned", "scope"):
        found["bug"] = RANKING
    return found


def classify(
    session: Session, row: QueryTrace, expected_ids: list[str], expected_mode: str | None
) -> tuple[str, str | None, str, dict[str, Any]]:
    """(error_type, context-bug subtype, reason, per-id where_lost) of a wrong answer."""
    lost = {memory_id: where_lost(session, row, memory_id) for memory_id in expected_ids}
    if row.error is not None:
        return SYSTEM_ERROR, None, f"the call failed: {row.error}", lost
    bugs = {w["bug"] for w in lost.values() if w["bug"]}
    if expected_mode and row.mode_detected and expected_mode != row.mode_detected:
        bugs.add(WRONG_MODE)
    for bug in CONTEXT_BUGS:  # S004's order: store, mode, lifecycle, ranking
        if bug in bugs:
            why = next((f"{i}: {w['reason']}" for i, w in lost.items() if w["bug"] == bug), None)
            if bug == WRONG_MODE:
                why = f"mode detected {row.mode_detected}, expected {expected_mode}"
            return CONTEXT_BUG, bug, why or bug, lost
    # Not returned, yet no context bug: it did not exist for the call (stored after it ran).
    unseen = [f"{i}: {w['reason']}" for i, w in lost.items() if w["stage"] != "returned"]
    if unseen:
        why = "; ".join(unseen)
        return MODEL_BUG, None, f"no context bug: the call could not have found {why}", lost
    if expected_ids:
        return MODEL_BUG, None, "every expected memory was returned: the context was right", lost
    return MODEL_BUG, None, "no expected ids given and nothing else points at the context", lost


_STATS = text(
    """
    SELECT count(*) AS total,
           count(*) FILTER (WHERE error_type IS NOT NULL) AS failed,
           count(*) FILTER (WHERE error_type = 'context_bug') AS context_bug,
           count(*) FILTER (WHERE error_type = 'model_bug') AS model_bug,
           count(*) FILTER (WHERE error_type = 'system_error') AS system_error,
           count(*) FILTER (WHERE error_subtype = 'wrong_store_queried') AS wrong_store_queried,
           count(*) FILTER (WHERE error_subtype = 'wrong_mode_detected') AS wrong_mode_detected,
           count(*) FILTER (WHERE error_subtype = 'wrong_lifecycle_filter')
               AS wrong_lifecycle_filter,
           count(*) FILTER (WHERE error_subtype = 'retrieval_ranking_error')
               AS retrieval_ranking_error,
           percentile_cont(0.95) WITHIN GROUP (ORDER BY total_latency_ms) AS latency_p95,
           count(*) FILTER (WHERE verification IS NOT NULL) AS verified,
           count(*) FILTER (WHERE verification ->> 'passed' = 'false') AS verification_failed
    FROM query_trace
    WHERE created_at > :now - make_interval(days => :days)
    """
)
_FEEDBACK = text(
    """
    SELECT count(DISTINCT subject_id) AS judged,
           count(*) FILTER (WHERE payload ? 'mode_correct') AS mode_judged,
           count(*) FILTER (WHERE payload ->> 'mode_correct' = 'true') AS mode_right
    FROM event
    WHERE event_type = 'feedback' AND occurred_at > :now - make_interval(days => :days)
    """
)


def _window(session: Session, days: int, now: datetime | None = None) -> dict[str, Any]:
    at = now or session.scalar(text("SELECT now()"))
    stats = dict(session.execute(_STATS, {"days": days, "now": at}).mappings().one())
    stats.update(session.execute(_FEEDBACK, {"days": days, "now": at}).mappings().one())
    return stats


def _rate(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def error_attribution(session: Session, params: ErrorAttributionIn) -> ErrorAttributionOut:
    """S004's statistics over the last `days` days."""
    stats = _window(session, params.days)
    return ErrorAttributionOut(
        days=params.days,
        total_queries=stats["total"],
        failed_queries=stats["failed"],
        judged_queries=stats["judged"],
        failure_breakdown={f"{kind}s": stats[kind] for kind in ERROR_TYPES},
        context_bug_breakdown={bug: stats[bug] for bug in CONTEXT_BUGS},
        context_bug_rate=_rate(stats["context_bug"], stats["failed"]),
    )


def monitoring_alerts(session: Session, params: AlertsIn) -> AlertsOut:
    """S004's four alerts over the window; thresholds from the settings (MEMSYS_ALERT_*)."""
    settings = get_settings()
    stats = _window(session, params.days)
    p95 = stats["latency_p95"]
    metrics: dict[str, float | None] = {
        "latency_p95_ms": None if p95 is None else round(float(p95), 3),
        "verification_failure_rate": _rate(stats["verification_failed"], stats["verified"]),
        "mode_accuracy": _rate(stats["mode_right"], stats["mode_judged"]),
        "context_bug_rate": _rate(stats["context_bug"], stats["failed"]),
    }
    checks = (
        ("mode_detection_low", "warning", "mode_accuracy", settings.alert_mode_accuracy, -1),
        (
            "verification_failure_high",
            "critical",
            "verification_failure_rate",
            settings.alert_verification_failure_rate,
            1,
        ),
        ("latency_high", "warning", "latency_p95_ms", settings.alert_latency_p95_ms, 1),
        (
            "context_bug_rate_high",
            "critical",
            "context_bug_rate",
            settings.alert_context_bug_rate,
            1,
        ),
    )
    alerts = []
    for kind, severity, metric, threshold, direction in checks:
        value = metrics[metric]
        if value is not None and (value - threshold) * direction > 0:
            target = f"≥ {threshold}" if direction < 0 else f"≤ {threshold}"
            alerts.append(
                Alert(
                    type=kind,
                    severity=severity,
                    message=f"{metric.replace('_', ' ')}: {value} (target: {target})",
                    value=value,
                    threshold=threshold,
                )
            )
    return AlertsOut(days=params.days, alerts=alerts, metrics=metrics)
