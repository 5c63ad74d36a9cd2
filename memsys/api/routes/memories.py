"""Memories: store, recall, forget, context, count, list."""

from typing import Annotated

from fastapi import APIRouter, Query, Response

from memsys import runner
from memsys.schemas import (
    MemoryContextIn,
    MemoryContextOut,
    MemoryCountIn,
    MemoryCountOut,
    MemoryForgetIn,
    MemoryForgetOut,
    MemoryListIn,
    MemoryListOut,
    MemoryRecallIn,
    MemoryRecallOut,
    MemoryStoreIn,
    MemoryStoreOut,
)
from memsys.services import memories

router = APIRouter(prefix="/memories", tags=["memories"])


@router.post("", response_model=MemoryStoreOut, status_code=201)
def store(body: MemoryStoreIn, response: Response) -> MemoryStoreOut:
    """Store a memory (201); identical content in the namespace returns the existing one (200)."""
    out = runner.run(memories.store, body)
    if out.duplicate:
        response.status_code = 200
    return out


@router.get("", response_model=MemoryListOut)
def list_memories(params: Annotated[MemoryListIn, Query()]) -> MemoryListOut:
    """List memories page by page (MCP: memory_list)."""
    return runner.run(memories.list_memories, params)


@router.get("/count", response_model=MemoryCountOut)
def count(params: Annotated[MemoryCountIn, Query()]) -> MemoryCountOut:
    """Count memories (MCP: memory_count)."""
    return runner.run(memories.count, params)


@router.post("/recall", response_model=MemoryRecallOut)
def recall(body: MemoryRecallIn) -> MemoryRecallOut:
    """Memories most relevant to a query (MCP: memory_recall)."""
    return runner.run(memories.recall, body)


@router.post("/forget", response_model=MemoryForgetOut)
def forget(body: MemoryForgetIn) -> MemoryForgetOut:
    """Forget by id, query or input_value; golden rules need force (MCP: memory_forget)."""
    return runner.run(memories.forget, body)


@router.delete("/{memory_id}", response_model=MemoryForgetOut)
def forget_one(memory_id: str, force: bool = False, purge: bool = False) -> MemoryForgetOut:
    """Forget one memory by id."""
    return runner.execute(
        memories.forget, MemoryForgetIn, {"memory_id": memory_id, "force": force, "purge": purge}
    )


@router.post("/context", response_model=MemoryContextOut)
def context(body: MemoryContextIn) -> MemoryContextOut:
    """Markdown context within a token budget (MCP: memory_context)."""
    return runner.run(memories.context, body)
