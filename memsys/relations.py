"""The one registry of edge relations: S000's vocabulary, S001's memory relations, S003's
relation types, S002's edge types, and the two memsys writes itself.

Names are stored lower snake_case (S001 spells them so); a lookup accepts any case and
hyphens or spaces for underscores, so S000's `CAUSED_BY` and S001's `caused_by` are one
relation. S000 relations name the entity types they join (`Error CAUSED_BY Dependency`):
between two S000-typed entities (keys such as `err#…`, `dep#…`) those pairs are enforced.
Imports nothing from memsys: the schemas build their enums from it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RelationType:
    name: str
    meaning: str
    seeds: tuple[str, ...]
    # S000 (source type, target type) pairs; empty: any two nodes.
    pairs: tuple[tuple[str, str], ...] = ()
    internal: bool = False  # written by memsys itself, not by callers


_S000 = "S000"
REGISTRY: tuple[RelationType, ...] = (
    # S001 memory_relate
    RelationType("relates_to", "loosely related", ("S001",)),
    RelationType("supersedes", "replaces an older version (newer → older)", ("S001",)),
    RelationType(
        "caused_by",
        "an effect and its cause",
        ("S001", _S000, "S002"),
        (("error", "dependency"), ("warning", "dependency")),
    ),
    RelationType("contradicts", "states the opposite", ("S001",)),
    # S000 canonical vocabulary (active voice)
    RelationType("executes", "a run executed a command", (_S000,), (("run", "command"),)),
    RelationType(
        "emits",
        "a command produced an error or warning",
        (_S000,),
        (("command", "error"), ("command", "warning")),
    ),
    RelationType("resolves", "a fix resolves an error", (_S000,), (("fix", "error"),)),
    RelationType("mitigates", "a fix mitigates a warning", (_S000,), (("fix", "warning"),)),
    RelationType("has_outcome", "a fix and its measured outcome", (_S000,), (("fix", "outcome"),)),
    RelationType("derived_from", "a fix informed by a document", (_S000,), (("fix", "doc"),)),
    RelationType("references", "a document discusses a concept", (_S000,), (("doc", "concept"),)),
    RelationType("about", "an error concerns a concept", (_S000,), (("error", "concept"),)),
    RelationType("performed_by", "a run performed in a mode", (_S000,), (("run", "mode"),)),
    RelationType("uses", "a run used a tool", (_S000, "S002"), (("run", "tool"),)),
    RelationType("touches", "a run touched a file", (_S000,), (("run", "file"),)),
    # S003 relation types between memories
    RelationType("solves", "a solution solves a problem", ("S003",)),
    RelationType("causes", "a cause and its effect", ("S003",)),
    RelationType("builds_on", "extends an earlier one", ("S003",)),
    RelationType("alternative_to", "another way to the same end", ("S003",)),
    RelationType("requires", "needs the other first", ("S003",)),
    RelationType("follows", "comes after in a sequence", ("S003",)),
    RelationType("related_to", "loosely related (S003's spelling of relates_to)", ("S003",)),
    # S002 (Graphiti) edge types
    RelationType("depends_on", "needs the other to work", ("S002",)),
    RelationType("part_of", "a component of the other", ("S002",)),
    RelationType("similar_to", "much alike", ("S002",)),
    # written by memsys
    RelationType("mentions", "a chunk or episode names an entity", ("memsys",), internal=True),
    RelationType(
        "observation_of", "a memory is an observation of an entity", ("memsys",), internal=True
    ),
)
BY_NAME: dict[str, RelationType] = {r.name: r for r in REGISTRY}
# What callers may write (memory_relate, typed relations): everything but memsys's own.
PUBLIC: tuple[str, ...] = tuple(r.name for r in REGISTRY if not r.internal)


def normalise(name: str) -> str:
    return "_".join(name.strip().lower().replace("-", " ").split())


def canonical(name: str) -> str | None:
    """The registry's name for `name` (any case, - or space for _), or None."""
    found = BY_NAME.get(normalise(name))
    return found.name if found is not None else None


def require(name: str, internal: bool = False) -> str:
    """The canonical name, or ValueError naming the allowed ones."""
    found = canonical(name)
    if found is None or (BY_NAME[found].internal and not internal):
        raise ValueError(f"Unknown relation type: {name}. Use one of: {', '.join(PUBLIC)}")
    return found


def check_pair(relation: str, source_type: str, target_type: str) -> None:
    """S000 relations join given entity types: `Error CAUSED_BY Dependency`, not the reverse."""
    entry = BY_NAME[relation]
    if entry.pairs and (source_type, target_type) not in entry.pairs:
        allowed = ", ".join(f"{s} {relation.upper()} {t}" for s, t in entry.pairs)
        raise ValueError(
            f"{source_type} {relation.upper()} {target_type} is not in the S000 vocabulary "
            f"(allowed: {allowed})"
        )


def markdown_table() -> str:
    """The registry as the README shows it."""
    lines = ["| relation | meaning | seeds | S000 types |", "|---|---|---|---|"]
    for r in REGISTRY:
        pairs = ", ".join(f"{s} → {t}" for s, t in r.pairs)
        lines.append(f"| `{r.name}` | {r.meaning} | {', '.join(r.seeds)} | {pairs} |")
    return "\n".join(lines)
