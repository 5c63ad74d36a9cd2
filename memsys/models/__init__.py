"""THE schema: every table memsys has, one module per concept."""

from memsys.models.base import Base
from memsys.models.chunk import Chunk, Document
from memsys.models.graph import Edge, Entity, Episode, Fact
from memsys.models.lexicon import CorpusStat, TermStat
from memsys.models.lifecycle import MemoryAccess, MemoryChange
from memsys.models.log import AgentTrace, Event, QueryTrace, ValidationEvent
from memsys.models.namespace import Namespace
from memsys.models.preference import Preference
from memsys.models.token import ApiToken

__all__ = [
    "AgentTrace",
    "ApiToken",
    "Base",
    "Chunk",
    "CorpusStat",
    "Document",
    "Edge",
    "Entity",
    "Episode",
    "Event",
    "Fact",
    "MemoryAccess",
    "MemoryChange",
    "Namespace",
    "Preference",
    "QueryTrace",
    "TermStat",
    "ValidationEvent",
]
