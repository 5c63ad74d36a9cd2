"""The rows of typed observations (S000), S001's graph maintenance tools (B19, B20, B22),
S002's temporal-graph operations and versioned facts."""

from __future__ import annotations

from memsys.operations.spec import Cli, Operation, Rest
from memsys.schemas import facts as fc
from memsys.schemas import maintenance as mt
from memsys.schemas import observe as ob
from memsys.schemas import temporal as tg

GRAPH_CLI = "memsys.cli.graph"

KNOWLEDGE_OPERATIONS: tuple[Operation, ...] = (
    Operation(
        name="memory_observe",
        summary="Record an S000 observation envelope (command.exec, error.capture, "
        "warning.capture, fix.apply, fix.outcome, doc.note, run.summary) under the entity "
        "its stable key names (err#…, fix#…, doc#…), created on first sight; the same "
        "envelope twice is one observation. Links use the relation registry.",
        service="observations:observe",
        input=ob.MemoryObserveIn,
        output=ob.MemoryObserveOut,
        effect="idempotent",
        rest=(Rest("POST", "/graph/observe"),),
        cli=Cli("graph observe", render=f"{GRAPH_CLI}:show"),
    ),
    Operation(
        name="memory_detect_contradictions",
        summary="Detect memories that contradict a given memory: similar ones (cosine at "
        "least similarity_threshold) that negate it, state the opposite preference or change "
        "a value; optionally link them with contradicts edges.",
        service="maintenance:detect_contradictions",
        input=mt.DetectContradictionsIn,
        output=mt.DetectContradictionsOut,
        effect="write",
        rest=(Rest("POST", "/memories/{memory_id}/contradictions"),),
        cli=Cli("contradictions", arguments=("memory_id",), render=f"{GRAPH_CLI}:show"),
    ),
    Operation(
        name="memory_check_supersedes",
        summary="Check if a memory should supersede another: the most similar older memory "
        "it contradicts or updates; optionally link newer → older with a supersedes edge.",
        service="maintenance:check_supersedes",
        input=mt.CheckSupersedesIn,
        output=mt.CheckSupersedesOut,
        effect="write",
        rest=(Rest("POST", "/memories/{memory_id}/supersedes"),),
        cli=Cli("supersedes", arguments=("memory_id",), render=f"{GRAPH_CLI}:show"),
    ),
    Operation(
        name="memory_backfill_edges",
        summary="Backfill orphan memory edges: memories with no edge get their entity "
        "mentions linked, or a relates_to edge to their nearest similar memory.",
        service="maintenance:backfill_edges",
        input=mt.BackfillEdgesIn,
        output=mt.BackfillEdgesOut,
        effect="write",
        rest=(Rest("POST", "/edges/backfill"),),
        cli=Cli("backfill-edges", render=f"{GRAPH_CLI}:show"),
    ),
    Operation(
        name="add_episode",
        summary="Add an episode (S002 link): text or JSON with a reference time. It is stored "
        "as a memory; its entities (names, quoted terms, code identifiers, file names) and the "
        "relations its sentences state are extracted and linked, valid from reference_time.",
        service="episodes:add_episode",
        input=tg.AddEpisodeIn,
        output=tg.AddEpisodeOut,
        effect="write",
        rest=(Rest("POST", "/graph/episodes", status=201),),
        cli=Cli("graph episode", arguments=("content",), render=f"{GRAPH_CLI}:show"),
    ),
    Operation(
        name="search_entities",
        summary="Search for entities (S002): name matches first, then entities linked to "
        "what memsys's retrieval ranks highest, with a relevance score.",
        service="temporal_graph:search_entities",
        input=tg.SearchEntitiesIn,
        output=tg.SearchEntitiesOut,
        effect="read",
        rest=(Rest("POST", "/graph/entities/search"),),
        cli=Cli("graph entities", arguments=("query",), render=f"{GRAPH_CLI}:show"),
    ),
    Operation(
        name="search_edges",
        summary="Search for relationships (S002): edges valid at as_of around the entities "
        "the query ranks, with source and target and the fact they state.",
        service="temporal_graph:search_edges",
        input=tg.SearchEdgesIn,
        output=tg.SearchEdgesOut,
        effect="read",
        rest=(Rest("POST", "/graph/edges/search"),),
        cli=Cli("graph edges", arguments=("query",), render=f"{GRAPH_CLI}:show"),
    ),
    Operation(
        name="query_graph",
        summary="Query the graph (S002 query_graph): the best-matching entities and their "
        "neighbourhood within depth hops as of a time; scope, links and relevance.",
        service="temporal_graph:query_graph",
        input=tg.QueryGraphIn,
        output=tg.QueryGraphOut,
        effect="read",
        rest=(Rest("POST", "/graph/query"),),
        cli=Cli("graph query", arguments=("query",), render=f"{GRAPH_CLI}:show"),
    ),
    Operation(
        name="build_context",
        summary="Build context around entities (S002 build_context): their relations and "
        "versioned facts as of a time, nearest first, at most max_facts, as prompt lines.",
        service="temporal_graph:build_context",
        input=tg.BuildContextIn,
        output=tg.BuildContextOut,
        effect="read",
        rest=(Rest("POST", "/graph/context"),),
        cli=Cli("graph context", arguments=("entity_names",), render=f"{GRAPH_CLI}:show"),
    ),
    Operation(
        name="fact_set",
        summary="Record a versioned fact about an entity's attribute. A different statement "
        "supersedes the live version (semver bump, supersedes link, the old one closed but "
        "readable); the same statement again changes nothing.",
        service="facts:set_fact",
        input=fc.FactSetIn,
        output=fc.FactSetOut,
        effect="idempotent",
        rest=(Rest("POST", "/facts"),),
        cli=Cli(
            "graph fact-set",
            arguments=("entity", "attribute", "content"),
            render=f"{GRAPH_CLI}:show",
        ),
    ),
    Operation(
        name="fact_get",
        summary="The facts about an entity as of a time (default now): one version per "
        "attribute, the one that was live then.",
        service="facts:get_facts",
        input=fc.FactGetIn,
        output=fc.FactsOut,
        effect="read",
        rest=(Rest("GET", "/facts"),),
        cli=Cli("graph facts", arguments=("entity",), render=f"{GRAPH_CLI}:show"),
    ),
    Operation(
        name="fact_history",
        summary="Every version of an entity's facts, oldest first per attribute, with the "
        "supersedes chain and validity.",
        service="facts:history",
        input=fc.FactHistoryIn,
        output=fc.FactsOut,
        effect="read",
        rest=(Rest("GET", "/facts/history"),),
        cli=Cli("graph fact-history", arguments=("entity",), render=f"{GRAPH_CLI}:show"),
    ),
    Operation(
        name="fact_verify",
        summary="Mark a fact version verified now (or not verified).",
        service="facts:verify",
        input=fc.FactVerifyIn,
        output=fc.FactsOut,
        effect="idempotent",
        rest=(Rest("POST", "/facts/{fact_id}/verify"),),
        cli=Cli("graph fact-verify", arguments=("fact_id",), render=f"{GRAPH_CLI}:show"),
    ),
)
