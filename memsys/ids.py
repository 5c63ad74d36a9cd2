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


# What dedup does not tell apart, though the text is stored as given: every space separator
# (no-break, narrow no-break, ideographic, …: Unicode's Zs) reads as a space, and the format
# characters that change nothing a reader sees (zero-width space, word joiner, BOM, soft
# hyphen) as nothing. Zero-width (non-)joiners count: they change how a word or emoji is drawn.
_UNSEEN = str.maketrans(
    dict.fromkeys(
        "\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
        "\u200a\u202f\u205f\u3000",
        " ",
    )
    | dict.fromkeys("\u200b\u2060\ufeff\u00ad", None)
)


def as_read(text: str) -> str:
    """A text with the differences no reader sees read away (_UNSEEN): what dedup compares,
    and an entity's name as stored and looked up."""
    return text.translate(_UNSEEN)


def content_hash(content: str) -> str:
    """The hex SHA-256 of a text as dedup reads it (memsys.schemas.memories.content_text's
    form, its unseen differences read away, _UNSEEN): what dedup compares, in the database
    and in snapshots alike."""
    return hashlib.sha256(as_read(content).encode("utf-8")).hexdigest()


def content_hashes(content: str) -> list[str]:
    """content_hash, and the digest rows written before dedup read unseen characters away
    hold for this text (of the text as given) when it differs: the upgrade c8e4a1f7d362
    rewrote them, except a row whose new digest another live memory already held (two live
    memories cannot hold one), so a lookup of a text's live memory asks for both."""
    legacy = hashlib.sha256(content.encode("utf-8")).hexdigest()
    digest = content_hash(content)
    return [digest] if legacy == digest else [digest, legacy]


def new_id(prefix: str) -> str:
    """A random id with a readable prefix: 64 random bits are plenty per namespace."""
    return f"{prefix}_{uuid.uuid4().hex[:16]}"


def looks_like_memory_id(value: str) -> bool:
    return bool(_MEMORY_ID.match(value.strip()))
