"""The operation table: one row per tool, and the three front ends are built from it.

A row names the S001 tool, the service that does the work, its input and output models,
its MCP annotations, its REST route(s) and its CLI command. The MCP server
(`memsys.mcp.server`), the FastAPI routers (`memsys.api.operations`) and the typer app
(`memsys.cli.commands`) read this table; descriptions, defaults and bounds come from the
input model's fields, so they are written once and shown alike in the MCP input schema,
in OpenAPI and in `memsys <command> --help`.

Services and CLI renderers are named by "module:function" and imported on first call, so
that `memsys --help` loads neither the database layer nor the embedding model.

Adding a tool: write the service (`def op(session, params: OpIn) -> OpOut`), its two
models in `memsys/schemas/`, and one row here (plus, if the default JSON-ish output will not
do, a renderer in the CLI module of its concept).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from memsys import schemas as s

Effect = Literal["read", "write", "idempotent", "destructive"]


@dataclass(frozen=True)
class Rest:
    """One REST route of an operation. Path parameters come from `{name}` in `path`; the
    other fields go in the query string for GET and DELETE and in the JSON body otherwise,
    except those listed in `query`. `fields` limits a route to some of the input's fields
    (e.g. DELETE /memories/{memory_id} offers force and purge only)."""

    method: Literal["GET", "POST", "PUT", "DELETE"]
    path: str
    status: int = 200
    query: tuple[str, ...] = ()
    fields: tuple[str, ...] | None = None
    summary: str | None = None


@dataclass(frozen=True)
class Cli:
    """The CLI command. Fields become `--field-name` options unless listed in `arguments`
    (positional, in order) or renamed in `flags`; `flatten` spreads a nested model's fields
    (the search filters) as options of their own. `render` ("module:function") prints the
    human form; --json always prints the output model. `command` ("module:function")
    replaces the generated command where the CLI truly differs (progress bars)."""

    name: str
    arguments: tuple[str, ...] = ()
    flags: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    flatten: str | None = None
    hidden: tuple[str, ...] = ()
    render: str | None = None
    command: str | None = None
    help: str | None = None


@dataclass(frozen=True)
class Operation:
    name: str
    summary: str
    service: str
    input: type[s.Input] | None
    output: type[s.Output]
    effect: Effect
    rest: tuple[Rest, ...]
    cli: Cli
    mcp_hidden: tuple[str, ...] = ()  # fields S001's tool does not publish
    mcp_required: tuple[str, ...] = ()  # optional in the model, required by S001
    after: str | None = None  # "module:function" run with (params, result) after success

    @property
    def read_only(self) -> bool:
        return self.effect == "read"

    @property
    def destructive(self) -> bool:
        return self.effect == "destructive"

    @property
    def idempotent(self) -> bool:
        return self.effect == "idempotent"

    def run(self, data: dict[str, Any]) -> s.Output:
        """Validate `data` against the input model, then run the service in one transaction."""
        from memsys import runner

        if self.input is None:
            if data:
                raise_unknown(sorted(data))
            return runner.execute_bare(resolve(self.service))  # type: ignore[no-any-return]
        params = s.parse(self.input, data)
        return self.run_parsed(params)

    def run_parsed(self, params: s.Input) -> s.Output:
        from memsys import runner

        result: s.Output = runner.run(resolve(self.service), params)
        if self.after is not None:
            resolve(self.after)(params, result)
        return result


def raise_unknown(names: list[str]) -> None:
    from memsys.errors import InvalidInput

    raise InvalidInput(f"Unknown argument(s): {', '.join(names)} (this operation takes none)")


def resolve(ref: str) -> Callable[..., Any]:
    """ "memsys.services.memories:store" (or "memories:store" for a service) → the function."""
    module, _, name = ref.partition(":")
    if "." not in module:
        module = f"memsys.services.{module}"
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


def wake_worker(params: s.IndexDirectoryIn, result: s.IndexDirectoryOut) -> None:
    """index_directory with async_mode: the running server's worker embeds the queue now."""
    if params.async_mode:
        from memsys.background import worker

        worker().wake()


MEMORY_CLI = "memsys.cli.memory"
SEARCH_CLI = "memsys.cli.search"
DOCUMENT_CLI = "memsys.cli.documents"
PREFERENCE_CLI = "memsys.cli.preferences"

OPERATIONS: tuple[Operation, ...] = (
    # ------------------------------------------------------------------ documents
    Operation(
        name="index_file",
        summary="Index one document (.md .markdown .txt .py .pdf) so search can find it. "
        "Re-indexing an unchanged file does nothing; a changed file replaces its chunks.",
        service="indexing:index_file",
        input=s.IndexFileIn,
        output=s.IndexFileOut,
        effect="idempotent",
        rest=(Rest("POST", "/documents/index-file"),),
        cli=Cli("index-file", arguments=("file_path",), render=f"{DOCUMENT_CLI}:indexed_file"),
    ),
    Operation(
        name="index_directory",
        summary="Index every supported file under a folder. Unchanged files (same SHA-256) "
        "are skipped; files that fail are listed and skipped.",
        service="indexing:index_directory",
        input=s.IndexDirectoryIn,
        output=s.IndexDirectoryOut,
        effect="idempotent",
        rest=(Rest("POST", "/documents/index-directory"),),
        cli=Cli("index-directory", command=f"{DOCUMENT_CLI}:index_directory"),
        after="memsys.operations:wake_worker",
    ),
    Operation(
        name="delete_chunks",
        summary="Delete specific chunks by id (golden-rule memories are protected).",
        service="documents:delete_chunks",
        input=s.DeleteChunksIn,
        output=s.DeleteChunksOut,
        effect="destructive",
        rest=(Rest("POST", "/documents/delete-chunks"),),
        cli=Cli("delete-chunks", arguments=("ids",), render=f"{DOCUMENT_CLI}:deleted_chunks"),
    ),
    Operation(
        name="delete_file",
        summary="Delete all chunks indexed from one source file.",
        service="documents:delete_file",
        input=s.DeleteFileIn,
        output=s.DeleteFileOut,
        effect="destructive",
        rest=(Rest("POST", "/documents/delete-file"),),
        cli=Cli("delete-file", arguments=("source_file",), render=f"{DOCUMENT_CLI}:deleted_file"),
    ),
    Operation(
        name="clear_index",
        summary="Delete every indexed document (memories are kept). Requires confirm=true.",
        service="documents:clear_index",
        input=s.ClearIndexIn,
        output=s.ClearIndexOut,
        effect="destructive",
        rest=(Rest("POST", "/documents/clear"),),
        cli=Cli("clear-index", flags={"confirm": ("--confirm",)}, render=f"{DOCUMENT_CLI}:cleared"),
        mcp_required=("confirm",),
    ),
    Operation(
        name="get_index_stats",
        summary="Collection statistics: chunks, source files, namespaces, memories, golden rules.",
        service="index_stats:stats",
        input=None,
        output=s.IndexStatsOut,
        effect="read",
        rest=(Rest("GET", "/documents/stats"),),
        cli=Cli("stats", render=f"{DOCUMENT_CLI}:show_stats"),
    ),
    # ------------------------------------------------------------------ search
    Operation(
        name="search",
        summary="Search indexed documents and memories (semantic + keyword, fused).",
        service="search:search",
        input=s.SearchIn,
        output=s.SearchOut,
        effect="read",
        rest=(Rest("POST", "/search"),),
        cli=Cli("search", arguments=("query",), render=f"{SEARCH_CLI}:found"),
    ),
    Operation(
        name="search_with_filters",
        summary="Search within a namespace, a doc_type ('memory' or 'document') or one "
        "source file.",
        service="search:search_with_filters",
        input=s.SearchWithFiltersIn,
        output=s.SearchOut,
        effect="read",
        rest=(Rest("POST", "/search/filtered"),),
        cli=Cli(
            "search-with-filters",
            arguments=("query",),
            flatten="filters",
            render=f"{SEARCH_CLI}:found",
        ),
    ),
    Operation(
        name="search_with_budget",
        summary="The best results that fit in a token budget; the budget is never exceeded.",
        service="search:search_with_budget",
        input=s.SearchWithBudgetIn,
        output=s.SearchBudgetOut,
        effect="read",
        rest=(Rest("POST", "/search/budget"),),
        cli=Cli(
            "search-with-budget",
            arguments=("query",),
            flatten="filters",
            render=f"{SEARCH_CLI}:budgeted",
        ),
    ),
    # ------------------------------------------------------------------ memories
    Operation(
        name="memory_store",
        summary="Store something worth remembering: a preference, decision, pattern, fact, "
        "fix, ... Identical content in the same namespace returns the existing id with "
        "duplicate=true.",
        service="memories:store",
        input=s.MemoryStoreIn,
        output=s.MemoryStoreOut,
        effect="write",
        # 201 for a new memory, 200 for a duplicate (memsys.api.operations)
        rest=(Rest("POST", "/memories", status=201),),
        cli=Cli(
            "store",
            arguments=("content",),
            flags={"tags": ("--tag",)},
            render=f"{MEMORY_CLI}:stored",
        ),
        mcp_hidden=("lifecycle",),
    ),
    Operation(
        name="memory_store_batch",
        summary="Store many memories at once (up to 1000), embedded together at the model's "
        "batch speed; each is deduplicated like memory_store. All or nothing.",
        service="memories:store_batch",
        input=s.MemoryStoreBatchIn,
        output=s.MemoryStoreBatchOut,
        effect="write",
        rest=(Rest("POST", "/memories/batch"),),
        cli=Cli("store-batch", command=f"{MEMORY_CLI}:store_batch"),
    ),
    Operation(
        name="memory_recall",
        summary="Recall the memories most relevant to a query. Use before acting on a task.",
        service="memories:recall",
        input=s.MemoryRecallIn,
        output=s.MemoryRecallOut,
        effect="read",
        rest=(Rest("POST", "/memories/recall"),),
        cli=Cli("recall", arguments=("query",), render=f"{MEMORY_CLI}:recalled"),
    ),
    Operation(
        name="memory_forget",
        summary="Forget memories by id or by query. Golden rules are kept unless force=true.",
        service="memories:forget",
        input=s.MemoryForgetIn,
        output=s.MemoryForgetOut,
        effect="destructive",
        rest=(
            Rest("POST", "/memories/forget"),
            Rest(
                "DELETE",
                "/memories/{memory_id}",
                fields=("memory_id", "force", "purge"),
                summary="Forget one memory by id.",
            ),
        ),
        cli=Cli(
            "forget",
            arguments=("input_value",),
            flags={"memory_id": ("--id",)},
            render=f"{MEMORY_CLI}:forgotten",
        ),
    ),
    Operation(
        name="memory_context",
        summary="Markdown of the memories to inject into a prompt, golden rules first, "
        "within budget.",
        service="context:context",
        input=s.MemoryContextIn,
        output=s.MemoryContextOut,
        effect="read",
        rest=(Rest("POST", "/memories/context"),),
        cli=Cli(
            "context",
            arguments=("query",),
            flags={"token_budget": ("--token-budget", "-b")},
            render=f"{MEMORY_CLI}:show_context",
        ),
    ),
    Operation(
        name="memory_count",
        summary="Count memories, optionally by namespace and type.",
        service="memories:count",
        input=s.MemoryCountIn,
        output=s.MemoryCountOut,
        effect="read",
        rest=(Rest("GET", "/memories/count"),),
        cli=Cli("count", render=f"{MEMORY_CLI}:counted"),
    ),
    Operation(
        name="memory_list",
        summary="List memories page by page.",
        service="memories:list_memories",
        input=s.MemoryListIn,
        output=s.MemoryListOut,
        effect="read",
        rest=(Rest("GET", "/memories"),),
        cli=Cli("list", flags={"descending": ("--desc/--asc",)}, render=f"{MEMORY_CLI}:listed"),
    ),
    Operation(
        name="memory_list_namespaces",
        summary="Every namespace with its memory, chunk, document and preference counts.",
        service="namespaces:list_with_counts",
        input=None,
        output=s.NamespaceListOut,
        effect="read",
        rest=(Rest("GET", "/namespaces"),),
        cli=Cli("namespaces", render=f"{MEMORY_CLI}:show_namespaces"),
    ),
    # ------------------------------------------------------------------ preferences
    Operation(
        name="preference_set",
        summary="Set a user or project preference; every change is kept as a new version.",
        service="preferences:set_value",
        input=s.PreferenceSetIn,
        output=s.PreferenceSetOut,
        effect="idempotent",
        rest=(Rest("PUT", "/preferences/{key:path}", query=("namespace",)),),
        cli=Cli("pref set", arguments=("key", "value"), render=f"{PREFERENCE_CLI}:was_set"),
    ),
    Operation(
        name="preference_get",
        summary="Read a preference now, or as it was at a past time.",
        service="preferences:get",
        input=s.PreferenceGetIn,
        output=s.PreferenceOut,
        effect="read",
        rest=(Rest("GET", "/preferences/{key:path}"),),
        cli=Cli("pref get", arguments=("key",), render=f"{PREFERENCE_CLI}:got"),
    ),
    Operation(
        name="preference_list",
        summary="All preferences of a namespace, now or as of a past time.",
        service="preferences:list_values",
        input=s.PreferenceListIn,
        output=s.PreferenceListOut,
        effect="read",
        rest=(Rest("GET", "/preferences"),),
        cli=Cli("pref list", render=f"{PREFERENCE_CLI}:listed"),
    ),
    Operation(
        name="preference_delete",
        summary="Delete a preference: its current value is closed, its history is kept.",
        service="preferences:delete",
        input=s.PreferenceKeyIn,
        output=s.PreferenceDeleteOut,
        effect="destructive",
        rest=(Rest("DELETE", "/preferences/{key:path}"),),
        cli=Cli("pref delete", arguments=("key",), render=f"{PREFERENCE_CLI}:deleted"),
    ),
    Operation(
        name="preference_history",
        summary="Every version a preference has had, oldest first.",
        service="preferences:history",
        input=s.PreferenceKeyIn,
        output=s.PreferenceHistoryOut,
        effect="read",
        rest=(Rest("GET", "/preferences/{key:path}/history"),),
        cli=Cli("pref history", arguments=("key",), render=f"{PREFERENCE_CLI}:history"),
    ),
)

BY_NAME: dict[str, Operation] = {op.name: op for op in OPERATIONS}
