"""The rows of memsys's own tools: documents, search, memories, preferences."""

from __future__ import annotations

from memsys import schemas as s
from memsys.operations.spec import Cli, Operation, Rest

MEMORY_CLI = "memsys.cli.memory"
SEARCH_CLI = "memsys.cli.search"
DOCUMENT_CLI = "memsys.cli.documents"
PREFERENCE_CLI = "memsys.cli.preferences"

CORE_OPERATIONS: tuple[Operation, ...] = (
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
        after="memsys.operations.spec:wake_worker",
    ),
    Operation(
        name="index_directory",
        summary="Index every supported file under a folder. Unchanged files (same SHA-256) "
        "are skipped; files that fail are listed and skipped; files indexed from it before "
        "and deleted since are dropped from the index (removed_files), but kept with a "
        "warning when the folder, or a subfolder still there, holds no file at all (a disk "
        "not mounted?) unless force.",
        service="folders:index_directory",
        input=s.IndexDirectoryIn,
        output=s.IndexDirectoryOut,
        effect="destructive",  # it drops the files gone from the folder
        rest=(Rest("POST", "/documents/index-directory"),),
        cli=Cli("index-directory", command=f"{DOCUMENT_CLI}:index_directory"),
        after="memsys.operations.spec:wake_worker",
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
            from_file=f"{MEMORY_CLI}:store_file",
        ),
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
        cli=Cli(
            "store-batch",
            command=f"{MEMORY_CLI}:store_batch",
            help="Store every memory of a JSON-lines file (any size), embedded in batches: "
            "every line is checked first, then batches of 500 are stored, each all or "
            "nothing. Like `memsys store --from-file`, which also takes the fields a line "
            "leaves out as options (--type, --tag, …).",
        ),
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
        summary="Forget memories by id or by query. Golden rules are kept unless force=true; "
        "so are the pinned memories a query matches (listed in pinned_kept_ids).",
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
