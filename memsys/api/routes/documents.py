"""Document indexing and management."""

from fastapi import APIRouter

from memsys import runner
from memsys.background import worker
from memsys.schemas import (
    ClearIndexIn,
    ClearIndexOut,
    DeleteChunksIn,
    DeleteChunksOut,
    DeleteFileIn,
    DeleteFileOut,
    IndexDirectoryIn,
    IndexDirectoryOut,
    IndexFileIn,
    IndexFileOut,
    IndexStatsOut,
)
from memsys.services import documents

router = APIRouter(prefix="/documents", tags=["documents"])


@router.post("/index-file", response_model=IndexFileOut)
def index_file(body: IndexFileIn) -> IndexFileOut:
    """Index one file (MCP: index_file)."""
    return runner.run(documents.index_file, body)


@router.post("/index-directory", response_model=IndexDirectoryOut)
def index_directory(body: IndexDirectoryIn) -> IndexDirectoryOut:
    """Index a folder; with async_mode the embeddings finish in the background."""
    out = runner.run(documents.index_directory, body)
    if body.async_mode:
        worker().wake()
    return out


@router.get("/stats", response_model=IndexStatsOut)
def stats() -> IndexStatsOut:
    """Collection statistics (MCP: get_index_stats)."""
    return runner.execute_bare(documents.stats)


@router.post("/delete-chunks", response_model=DeleteChunksOut)
def delete_chunks(body: DeleteChunksIn) -> DeleteChunksOut:
    """Delete chunks by id (MCP: delete_chunks)."""
    return runner.run(documents.delete_chunks, body)


@router.post("/delete-file", response_model=DeleteFileOut)
def delete_file(body: DeleteFileIn) -> DeleteFileOut:
    """Delete every chunk of one source file (MCP: delete_file)."""
    return runner.run(documents.delete_file, body)


@router.post("/clear", response_model=ClearIndexOut)
def clear_index(body: ClearIndexIn) -> ClearIndexOut:
    """Delete every indexed document; needs {"confirm": true} (MCP: clear_index)."""
    return runner.run(documents.clear_index, body)
