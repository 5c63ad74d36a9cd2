"""memory_query (S004 "Nexus Processor"): plan → stores → verify → curated core + extended.

1. Plan (memsys.retrieval.plan): the mode (given, or detected with a confidence) and the
   stores S004's router picks, with the patterns that picked them.
2. Stores: kv answers from the stored preferences whose key the query names (the preferences
   service); relational from the knowledge-graph entities it names, by name or by type
   ("list all clients"), with their observations and relations (the knowledge service); the
   vector, graph and event_log stores are the retrieval pipeline's channels (dense + BM25,
   PPR, temporal ranges), run once; bayesian estimates P(X|Y) with its counts
   (memsys.retrieval.bayes). The structured stores answer alone only with an exact match (a
   preference whose key the query names in full and asks nothing beyond, an entity it
   names); a partial key, a question about more than the key ("my editor font size" and the
   key `editor`) or an entity type ("which services use Redis?") is an answer among others,
   so the pipeline runs too, and a kv or relational question that finds nothing there is
   answered by the pipeline instead. The routing notes say which.
3. Verify (execution mode): memsys.retrieval.verify.
4. Assemble: memsys.retrieval.assemble, within the token budget.
The trace records the plan, mode, routing, verification and output; the memories handed out
have their access counted, after retrieval.
"""

from __future__ import annotations

import json
import re
import time
from datetime import datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.orm import Session

from memsys.config import get_settings
from memsys.errors import NotFound
from memsys.models.log import ALL_NAMESPACES
from memsys.retrieval import assemble, bayes, pipeline, plan, timephrases, verify
from memsys.retrieval.assemble import Item
from memsys.runner import before_transaction, retrieval_only
from memsys.schemas import PreferenceListIn
from memsys.schemas.query import QueryChunk, QueryIn, QueryOut, RoutingOut, VerificationOut
from memsys.services import knowledge, lifecycle, namespaces, preferences, search, tracing
from memsys.vocabulary import is_golden

CHUNK_STORES = ("vector", "graph", "event_log")
PREFERENCE_NAMESPACE = "global"
MAX_ENTITIES = 10
TYPE_SCORE = 0.5  # an entity of a type the query names, not the entity it names
_WORD = re.compile(r"[a-z0-9]+")
_KEY_SPLIT = re.compile(r"[^a-z0-9]+")
# The words a question about a preference asks with ("which editor do I use", "my preferred
# theme"), as PostgreSQL's English analyser stems them: they name no more than the key does.
_ASKING = frozenset(
    {"use", "like", "prefer", "want", "favourit", "favorit", "usual", "current", "set"}
    | {"choos", "chosen", "pick", "default"}
    | {"user"}  # "which editor does the user use": whom an agent asks about, as "my" is
)
# What separates the words of a key or a question for that comparison: a key's `dark-mode` or
# `café_order` is read as the question's `dark-mode` and `café` are (the analyser alone reads a
# hyphenated word as one more lexeme, `dark-mod`, and _KEY_SPLIT drops letters beyond ASCII).
_NOT_WORD = re.compile(r"[\W_]+")
_LEXEMES = text(
    "SELECT k.i, array(SELECT lexeme FROM unnest(to_tsvector('english', k.t))) AS lexemes"
    " FROM unnest(CAST(:texts AS text[])) WITH ORDINALITY AS k(t, i) ORDER BY k.i"
)


# Plurals the router asks with ("list all people", "which companies") whose singular, the
# entity type, is not the word less its "s".
_IRREGULAR = {"people": "person", "children": "child", "men": "man", "women": "woman"}


def _words(text: str) -> set[str]:
    """The query's words and their singulars ("clients" → "client", "companies" → "company",
    "people" → "person"): an entity type or a key word is singular."""
    words = set(_WORD.findall(plan.normalise(text)))
    singular = {w[:-1] for w in words if len(w) > 3 and w.endswith("s")}
    singular |= {w[:-3] + "y" for w in words if len(w) > 4 and w.endswith("ies")}
    singular |= {
        w[:-2] for w in words if len(w) > 4 and w.endswith(("sses", "xes", "ches", "shes"))
    }
    singular |= {_IRREGULAR[w] for w in words if w in _IRREGULAR}
    return words | singular


def _preference_items(
    session: Session, query: str, namespace: str | None, as_of: datetime | None
) -> list[Item]:
    """Stored preferences whose key words the query names (half of them or more), best
    first; only one whose key it names in full is ground truth (`test_runner` does not
    answer "what is my test plan"). A key the namespace sets itself hides the user's
    `global` value of it (two values of one setting, both ground truth, answered nothing)."""
    asked = _words(query)
    named: list[tuple[Any, float]] = []
    keys: set[str] = set()
    for ns in dict.fromkeys([n for n in (namespace, PREFERENCE_NAMESPACE) if n]):
        try:
            found = preferences.list_values(
                session, PreferenceListIn(namespace=ns, as_of=as_of)
            ).preferences
        except NotFound:  # a namespace with no preferences at all
            continue
        shadowed = set(keys)
        keys.update(pref.key for pref in found)
        for pref in found:
            if pref.key in shadowed:
                continue
            words = [w for w in _KEY_SPLIT.split(pref.key.lower()) if w]
            share = sum(w in asked for w in words) / len(words) if words else 0.0
            if share >= 0.5:
                named.append((pref, share))
    whole = [pref.key for pref, share in named if share == 1.0]
    beyond = _asked_beyond(session, query, whole) if whole else {}
    items: list[Item] = []
    for pref, share in named:
        # A key named in full answers alone only when the question asks for nothing more:
        # "my editor font size" names the key `editor` but asks about something else.
        score = share if share < 1.0 else beyond[pref.key]
        value = pref.value if isinstance(pref.value, str) else json.dumps(pref.value)
        items.append(
            Item(
                id=f"pref:{pref.namespace}:{pref.key}",
                source="preference",
                namespace=pref.namespace,
                content=f"{pref.key}: {value}",
                score=round(score, 4),
                happened_at=pref.valid_from,
                ground_truth=score == 1.0,
            )
        )
    return sorted(items, key=lambda i: -i.score)


def _asked_beyond(session: Session, query: str, keys: list[str]) -> dict[str, float]:
    """For each key the query names in full: the share of the query's words (stemmed by the
    English analyser, stop words and asking words left out) that the key's words cover; 1.0
    when the question asks about the key and nothing else. A key the analyser reads as no
    words at all covers the whole question (as before this check)."""
    texts = [_NOT_WORD.sub(" ", t.lower()) for t in (query, *keys)]
    rows = session.execute(_LEXEMES, {"texts": texts}).all()
    wanted = set(rows[0].lexemes) - _ASKING
    out: dict[str, float] = {}
    for key, row in zip(keys, rows[1:], strict=True):
        mine = set(row.lexemes)
        out[key] = len(wanted & mine) / len(wanted | mine) if mine and wanted - mine else 1.0
    return out


def _entity_items(
    session: Session, query: str, namespace: str | None, as_of: datetime | None
) -> tuple[list[Item], set[str]]:
    """Knowledge-graph entities the query names, or whose type it names ("which clients"),
    with what was observed and related as of `as_of` (now when None); and the ids of the
    observation memories those items quote."""
    ns = namespace or get_settings().graph_namespace
    text = plan.normalise(query)
    asked = _words(query)
    chosen: list[tuple[Any, bool]] = []
    for e in knowledge.live_entities(session, ns, at=as_of):
        named = re.search(rf"(?<!\w){re.escape(e.name.lower())}(?!\w)", text) is not None
        if named or e.entity_type.lower() in asked:
            chosen.append((e, named))
    chosen = chosen[:MAX_ENTITIES]
    if not chosen:
        return [], set()
    entities = [e for e, _ in chosen]
    observed, quoted = knowledge.observed(session, ns, entities, as_of)
    relations = knowledge.relations_of(session, ns, entities, both=False, at=as_of)
    items = []
    for entity, named in chosen:
        links = [
            f"{r.from_} {r.relationType} {r.to}"
            for r in relations
            if entity.name in (r.from_, r.to)
        ]
        items.append(
            Item(
                id=entity.id,
                source="entity",
                namespace=ns,
                content="; ".join(
                    [f"{entity.name} ({entity.entity_type})", *observed[entity.id], *links]
                ),
                # Of a type the query names: as relevant as a hit matching half of the
                # query, no more ("which services use Redis?" lists every service).
                score=1.0 if named else TYPE_SCORE,
                happened_at=entity.created_at,
            )
        )
    return sorted(items, key=lambda i: -i.score), quoted


def _exact(item: Item) -> bool:
    """A structured answer that may stand alone: a preference whose key the query names in
    full, an entity it names (not one of a type it names), an estimate it asked for."""
    if item.source == "preference":
        return item.ground_truth
    if item.source == "entity":
        return item.score == 1.0
    return item.source == "bayesian"


def _merged(structured: list[Item], chunks: list[Item]) -> list[Item]:
    """Exact structured answers first; the others each placed before the first chunk that
    scores lower (both are relevances in [0, 1]); the chunks keep the pipeline's order."""
    out = [i for i in structured if _exact(i)]
    rest = sorted((i for i in structured if not _exact(i)), key=lambda i: -i.score)
    for chunk in chunks:
        while rest and rest[0].score > chunk.score:
            out.append(rest.pop(0))
        out.append(chunk)
    return out + rest


def _estimate_item(found: bayes.Estimate, namespace: str | None) -> Item:
    return Item(
        id=f"p:{found.x}|{found.y}",
        source="bayesian",
        namespace=namespace or ALL_NAMESPACES,
        content=found.answer,
        score=1.0 if found.known else 0.0,
    )


def _chunk_item(hit: pipeline.Hit, full: str | None = None) -> Item:
    """A hit as an item; an aged memory's `full` text instead of its stored summary."""
    return Item(
        id=hit.id,
        source=hit.doc_type,
        namespace=hit.namespace,
        content=hit.content if full is None else full,
        score=round(hit.score, 4),
        happened_at=hit.happened_at,
        ground_truth=hit.doc_type == "memory" and is_golden(hit.memory_type, hit.confidence),
        tokens=hit.token_count if full is None else None,
    )


def _chunk(piece: assemble.Piece) -> QueryChunk:
    item = piece.item
    return QueryChunk(
        id=item.id,
        source=item.source,
        namespace=item.namespace,
        snippet=piece.snippet,
        score=item.score,
        tokens=piece.tokens,
        happened_at=item.happened_at,
        ground_truth=item.ground_truth,
    )


@retrieval_only
@before_transaction(search.embed_query_of)
def query(session: Session, params: QueryIn) -> QueryOut:
    """Answer a query from the stores its plan picks: curated core + extended context."""
    scope = {"namespace": params.namespace} if params.namespace else {}
    with tracing.traced(
        "memory_query", params.query, namespace=params.namespace, filters=scope, params=params
    ) as draft:
        return _query(session, params, draft)


def _query(session: Session, params: QueryIn, draft: tracing.Draft) -> QueryOut:
    started = time.perf_counter()
    namespaces.require(session, params.namespace)
    routing = plan.route(params.query, params.mode)
    # A replay reads every store as its trace's time (or the call's own as_of) says.
    how = tracing.replay_settings()
    as_of = how.as_of if how is not None else params.as_of
    timings: dict[str, float] = {"plan_ms": _ms(started)}
    mark = time.perf_counter()
    items: list[Item] = []
    queried: list[str] = []
    notes: list[str] = []
    if "kv" in routing.stores:
        items += _preference_items(session, params.query, params.namespace, as_of)
        queried.append("kv")
    quoted: set[str] = set()  # observation memories the entity items quote already
    if "relational" in routing.stores:
        entities, quoted = _entity_items(session, params.query, params.namespace, as_of)
        items += entities
        queried.append("relational")
    timings["structured_ms"] = _ms(mark)
    chunk_stores = [s for s in routing.stores if s in CHUNK_STORES]
    filters = {"namespace": params.namespace} if params.namespace else {}
    probability = None
    if "bayesian" in routing.stores:
        named = bayes.parse(params.query)
        if named is None:
            notes.append("bayesian: the query does not name X and Y; answered by retrieval")
        else:
            probability = bayes.estimate(session, *named, filters, as_of)
            items.append(_estimate_item(probability, params.namespace))
            queried.append("bayesian")
    structured = [i.id for i in items]  # what kv, relational and bayesian found (debug_why)
    structured_from = {i.namespace for i in items}
    found = None
    if chunk_stores or not any(_exact(i) for i in items):
        if not chunk_stores:
            chunk_stores = ["vector"]
            if items:
                notes.append(
                    f"{' and '.join(queried)}: no exact match (a preference key named in "
                    "part, an entity type); retrieval ran too"
                )
            elif queried:
                notes.append(f"{' and '.join(queried)}: nothing found; fell back to vector")
        limit = params.top_k + assemble.EXTENDED[routing.mode] + 10
        if how is None:
            found = pipeline.retrieve(
                session, params.query, filters=filters, limit=limit, as_of=params.as_of
            )
        else:
            found = pipeline.retrieve(
                session,
                params.query,
                filters=filters,
                limit=limit,
                as_of=how.as_of,
                vector=how.vector,
                weights=how.weights,
                method=how.method,
                terms=how.terms,
            )
        tracing.saw(
            found,
            {"filters": filters, "limit": limit, "pool": max(get_settings().candidate_pool, limit)},
        )
        # aged hits weighed by their full text; those handed out are rekindled below
        full = lifecycle.full_texts_of(session, found.hits) if as_of is None else {}
        chunks = [
            _chunk_item(h, full.get((h.namespace, h.id))) for h in found.hits if h.id not in quoted
        ]
        items = _merged(items, chunks)
        queried += chunk_stores
        timings.update(found.timings)
    checked = None
    if routing.mode == "execution":
        mark = time.perf_counter()
        items, checked = verify.run(session, items)
        timings["verify_ms"] = _ms(mark)
    mark = time.perf_counter()
    result = assemble.curated(items, routing.mode, params.top_k, params.max_tokens, params.query)
    if checked is not None:
        returned = [p.item for p in result.core + result.extended]
        checked = verify.of_answer(session, checked, returned)
    if found is not None and as_of is None:  # a view of the past reads the text of then
        given = {p.item.id for p in result.core + result.extended}
        lifecycle.rekindle_hits(session, [h for h in found.hits if h.id in given])
    timings["assemble_ms"] = _ms(mark)
    core = [_chunk(p) for p in result.core]
    extended = [_chunk(p) for p in result.extended]
    handed = [c.id for c in core + extended if c.source == "memory"]
    search.touch(session, handed)
    if found is not None:
        ranges = found.channels["temporal"]["ranges"]
    else:
        ranges = [s.as_dict() for s in timephrases.find(params.query, as_of)]
    routing_out = RoutingOut(
        stores=routing.stores,
        reasoning=routing.reasoning,
        matched=routing.matched,
        time_ranges=ranges,
        notes=notes,
    )
    verification = VerificationOut.model_validate(checked.as_dict()) if checked else None
    timings["total_ms"] = _ms(started)
    if any(
        ns != draft.namespace for ns in structured_from | {c.namespace for c in core + extended}
    ):
        # The user's `global` preferences answer in every namespace; a trace quoting them is
        # not the namespace's own (a token that reads only that namespace must not read it),
        # nor one naming them among the structured items found (a key names what it holds).
        draft.namespace = ALL_NAMESPACES
    query_id = tracing.write(
        session,
        draft,
        stores=queried,
        routing=routing.reasoning,
        retrieved=[
            {"id": c.id, "score": c.score, "tokens": c.tokens, "part": part}
            for part, chunks in (("core", core), ("extended", extended))
            for c in chunks
        ],
        timings=timings,
        output={
            "text": result.output,
            "tokens_used": result.tokens_used,
            "max_tokens": params.max_tokens,
            "left_out": result.left_out,
            "structured": structured,
            "plan": routing_out.model_dump(),
            "mode_detected": not routing.mode_given,
            "probability": probability.as_dict() if probability else None,
        },
        mode_detected=routing.mode,
        mode_confidence=routing.mode_confidence,
        verification=checked.as_dict() if checked else None,
    )
    return QueryOut(
        query_id=query_id,
        query=params.query,
        output=result.output,
        core_chunks=core,
        extended_chunks=extended,
        latency_ms=timings["total_ms"],
        stores_queried=queried,
        mode=routing.mode,
        mode_confidence=routing.mode_confidence,
        mode_detected=not routing.mode_given,
        routing=routing_out,
        verification=verification,
        tokens_used=result.tokens_used,
        max_tokens=params.max_tokens,
        left_out=result.left_out,
        probability=probability.as_dict() if probability else None,
        timings=timings,
    )


def _ms(since: float) -> float:
    return round((time.perf_counter() - since) * 1000, 3)
