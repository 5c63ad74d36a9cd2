"""Documents: index a file or a folder, delete chunks or files, clear, statistics."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import ConfigDict, Field

from memsys.schemas.common import Input, NamespaceName, Output, Rule, path_checker

DocumentNamespace = Annotated[
    NamespaceName, Field(description="Namespace for organizing documents")
]
MAX_DELETE_IDS = 1000


def _ids(v: list[str]) -> list[str]:
    if not v:
        raise ValueError("ids cannot be empty: give the chunk ids to delete")
    if len(v) > MAX_DELETE_IDS:
        raise ValueError(f"At most {MAX_DELETE_IDS} ids per call, got {len(v)}")
    return list(dict.fromkeys(i.strip() for i in v))


class IndexFileIn(Input):
    file_path: Annotated[
        str,
        path_checker("File"),
        Field(description="Absolute or relative path to the document"),
    ]
    namespace: DocumentNamespace = "default"


class IndexFileOut(Output):
    chunks_created: int
    source_file: str
    namespace: str
    chunk_ids: list[str]
    skipped_unchanged: bool
    replaced_chunks: int
    document_id: str
    pending_embeddings: int = Field(
        default=0,
        description="Chunks left to the server's embedding worker (a long file: full-text "
        "search finds them at once, search by meaning once embedded)",
    )


class IndexDirectoryIn(Input):
    dir_path: Annotated[
        str, path_checker("Directory"), Field(description="Directory path to scan for documents")
    ]
    recursive: Annotated[bool, Field(description="Scan subdirectories recursively")] = True
    namespace: DocumentNamespace = "default"
    async_mode: Annotated[
        bool,
        Field(
            description="Return at once and finish embeddings in the background "
            "(full-text search works immediately). False waits for every embedding."
        ),
    ] = True
    force: Annotated[
        bool,
        Field(
            description="Drop the files indexed from this folder before even when it, or a "
            "subfolder that still exists, now holds no file at all. Without it such a folder "
            "(a disk not mounted?) keeps them, with a warning; files gone from a folder that "
            "still holds others, or gone with their subfolder, are always dropped."
        ),
    ] = False


class FailedFile(Output):
    file: str
    error: str


class IndexDirectoryOut(Output):
    files_indexed: int
    total_chunks: int
    failed_files: list[FailedFile]
    skipped_duplicates: int
    pending_embeddings: int
    namespace: str
    # Files indexed from the folder before and deleted from it since: their chunks are closed.
    removed_files: list[str] = []
    removed_chunks: int = 0
    # Files indexed before from the folder or a subfolder that now holds none: kept (`force`).
    kept_files: list[str] = []
    warning: str | None = Field(
        default=None,
        description="Set when the folder or a subfolder held no file and kept_files were kept",
    )


class DeleteChunksIn(Input):
    ids: Annotated[
        list[str],
        Rule(_ids, minItems=1, maxItems=MAX_DELETE_IDS),
        Field(description="List of chunk IDs to delete"),
    ]


class DeleteChunksOut(Output):
    deleted_count: int
    deleted_ids: list[str]
    not_found_ids: list[str]
    protected_ids: list[str]


class DeleteFileIn(Input):
    source_file: Annotated[
        str,
        path_checker("Source file"),
        Field(description="Source file path to delete chunks for"),
    ]
    namespace: Annotated[
        NamespaceName | None,
        Field(description="Only this namespace (e.g. 'global', 'project:myapp')"),
    ] = None


class DeleteFileOut(Output):
    deleted_count: int
    source_file: str


def _confirm_required(schema: dict[str, Any]) -> None:
    """Published as required and true: the default (false) is always refused."""
    schema["required"] = ["confirm"]
    schema["properties"]["confirm"].pop("default", None)


class ClearIndexIn(Input):
    model_config = ConfigDict(json_schema_extra=_confirm_required)

    confirm: Annotated[
        bool, Rule(enum=[True]), Field(description="Safety gate - must be true to proceed")
    ] = False
    namespace: Annotated[NamespaceName | None, Field(description="Only this namespace")] = None


class ClearIndexOut(Output):
    deleted_count: int
    documents_deleted: int


class IndexStatsOut(Output):
    total_documents: int
    unique_sources: int
    source_files: list[str]
    namespaces: list[str]
    memory_count: int
    golden_rule_count: int
    pending_embeddings: int
