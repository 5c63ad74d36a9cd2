"""Prefixed string ids used at the API boundary (mem_…, chk_…, doc_…, qry_…)."""

import hashlib
import re
import uuid

MEMORY = "mem"
CHUNK = "chk"
DOCUMENT = "doc"
QUERY = "qry"
ENTITY = "ent"
FACT = "fact"
TRACE = "trc"

_MEMORY_ID = re.compile(r"^mem_[0-9a-f]{16}$")

# The words REST routes put where a memory's id goes (/v1/memories/count is the count, not
# the memory "count"). A database may hold such an id (import keeps the ids a file gives,
# and once took these too), so GET /v1/memories/by-id/ID reads any id and `memsys get ID`
# with a server running takes that route for these. tests/test_operations.py keeps this in
# step with the operation table.
ROUTE_WORDS = frozenset({"analyze-health", "batch", "context", "count", "forget", "recall"})


def content_hash(content: str) -> str:
    """The hex SHA-256 of a text as stored (memsys.schemas.memories.content_text's form): what
    dedup compares, in the database and in snapshots alike."""
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def new_id(prefix: str) -> str:
    """A random id with a readable prefix: 64 random bits are plenty per namespace."""
    return f"{prefix}_{uuid.uuid4().hex[:16]}"


def looks_like_memory_id(value: str) -> bool:
    return bool(_MEMORY_ID.match(value.strip()))
