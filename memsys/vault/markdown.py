"""S003's markdown files: a memory (YAML frontmatter + body), an edge file, and the paths and
file names the vault uses. Frontmatter is written by hand, one key per line in S003's order,
with strings as JSON (a valid YAML double-quoted scalar), so the same record always gives the
same bytes; it is read with PyYAML's safe loader.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import yaml

from memsys.models.chunk import STAGES
from memsys.vault.live import title
from memsys.vault.records import READER_KEYS, Located, Record, loads
from memsys.vocabulary import LIFECYCLES, MEMORY_TYPES

# S003's type directories, and the same rule (plural, dashes) for memsys's other types.
TYPE_DIRS = {
    "solution": "solutions",
    "fix": "fixes",
    "decision": "decisions",
    "configuration": "configurations",
    "problem": "problems",
    "workflow": "workflows",
    "code_pattern": "code-patterns",
    "error": "errors",
    "general": "general",
    "procedure": "procedures",
    "insight": "insights",
    "preference": "preferences",
    "pattern": "patterns",
    "session": "sessions",
    "fact": "facts",
    "golden_rule": "golden-rules",
}
EDGE_DIR = "graph/edges"
PINNED_DIR = "vault"
FENCE = "---"

_PLAIN = re.compile(r"^(mem|edge|ent|fact|chk)_[0-9a-f]+$")
_BARE_WORDS = set(MEMORY_TYPES) | set(LIFECYCLES) | set(STAGES)
# Characters YAML refuses anywhere in a stream, which JSON leaves some of raw, and NEL
# (U+0085), which YAML reads as a line break and folds into a space in a quoted value: escaped.
_NON_PRINTABLE = re.compile("[^\x09\x0a\x0d\x20-\x7e\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


MAX_YAML_VALUES = 100_000  # what one YAML text may expand to: far past a memory's fields


class SafeLoader(yaml.CSafeLoader):  # type: ignore[misc]
    """The safe loader, refusing a text whose aliases (`*name`) expand it past
    MAX_YAML_VALUES values: nine lines of nested aliases spell a third of a billion (the
    "billion laughs"), which a vault import walked for hours. An alias inside its own anchor
    (endless) is refused too."""

    def construct_document(self, node: Any) -> Any:
        if _expanded(node) > MAX_YAML_VALUES:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"the YAML expands to more than {MAX_YAML_VALUES:,} values through its "
                "aliases (*name)",
                node.start_mark,
            )
        return super().construct_document(node)


def _children(node: Any) -> list[Any]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return list(node.value) if isinstance(node, yaml.SequenceNode) else []


def _expanded(root: Any) -> int:
    """How many nodes the composed YAML stands for once its aliases are copied out, counted
    once per distinct node (a depth-first walk, no recursion), capped past the limit."""
    size: dict[int, int] = {}
    on_path = {id(root)}
    stack = [(root, iter(_children(root)))]
    while stack:
        node, children = stack[-1]
        child = next(children, None)
        if child is None:
            stack.pop()
            on_path.discard(id(node))
            total = 1 + sum(size[id(c)] for c in _children(node))
            size[id(node)] = min(total, MAX_YAML_VALUES + 1)
        elif id(child) in on_path:
            return MAX_YAML_VALUES + 1  # an alias inside its own anchor: endless
        elif id(child) not in size:
            on_path.add(id(child))
            stack.append((child, iter(_children(child))))
    return size[id(root)]


class _Loader(SafeLoader):
    """The safe loader, also reading JSON's exponent floats (1e+20) as numbers, and refusing
    a field given twice (YAML keeps the last one: an edit above it would be lost)."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base`: merged, may repeat
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                twice = key in seen
                seen.add(key)
            except TypeError:  # a key YAML cannot hash: its own error follows
                continue
            if twice:
                raise yaml.constructor.ConstructorError(
                    None, None, f"the field {key!r} is given twice", key_node.start_mark
                )
        return super().construct_mapping(node, deep)


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?[0-9]+(\.[0-9]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def quote(value: str) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return _NON_PRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def scalar(value: Any) -> str:
    """One YAML value on one line."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return value if _PLAIN.match(value) or value in _BARE_WORDS else quote(value)
    return _NON_PRINTABLE.sub(
        lambda m: f"\\u{ord(m.group()):04x}", json.dumps(value, ensure_ascii=False)
    )


def slug(text: str, limit: int = 50) -> str:
    words = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return words[:limit].rstrip("-") or "memory"


def short_hash(identifier: str, length: int = 6) -> str:
    return hashlib.sha256(identifier.encode()).hexdigest()[:length]


def memory_path(rec: Record, length: int = 6) -> str:
    """graph/<type dir>/<slug>-<6 hex>.md, or vault/… for a pinned memory."""
    folder = PINNED_DIR if rec["pinned"] else f"graph/{TYPE_DIRS[rec['type']]}"
    name = slug(title(rec["content"], rec["metadata"]))
    return f"{folder}/{name}-{short_hash(rec['id'], length)}.md"


def edge_path(edge: Record, length: int = 6) -> str:
    """graph/edges/<from-slug>--<TYPE>--<to-slug>-<6 hex>.md"""
    start, end = slug(edge["from_title"], 30), slug(edge["to_title"], 30)
    relation = edge["type"].upper()
    return f"{EDGE_DIR}/{start}--{relation}--{end}-{short_hash(edge['id'], length)}.md"


def render_memory(rec: Record, relations: list[Record]) -> str:
    """A memory file: S003's frontmatter (plus memsys's fields) and the content as body."""
    lines = [
        FENCE,
        f"id: {scalar(rec['id'])}",
        f"type: {scalar(rec['type'])}",
        f"title: {quote(title(rec['content'], rec['metadata']))}",
        f"namespace: {scalar(rec['namespace'])}",
        f"tags: {scalar(rec['tags'])}",
        f"importance: {scalar(rec['importance'])}",
        f"confidence: {scalar(rec['confidence'])}",
        f"lifecycle: {scalar(rec['lifecycle'])}",
        f"stage: {scalar(rec['stage'])}",
        f"pinned: {scalar(rec['pinned'])}",
    ]
    if rec["metadata"]:
        lines.append(f"metadata: {scalar(rec['metadata'])}")
    if rec.get("happened"):
        lines.append(f"happened: {rec['happened']}")
    lines += [f"created: {rec['created']}", f"updated: {rec['updated']}"]
    if relations:
        lines.append("relations:")
        for edge in relations:
            outgoing = edge["from_id"] == rec["id"]
            lines.append(f"- target: {scalar(edge['to_id'] if outgoing else edge['from_id'])}")
            lines.append(f"  type: {edge['type'].upper()}")
            lines.append(f"  direction: {'outgoing' if outgoing else 'incoming'}")
            lines.append(f"  strength: {scalar(edge['strength'])}")
            if edge["context"]:
                lines.append(f"  context: {quote(edge['context'])}")
            lines.append(f"  edge_id: {scalar(edge['id'])}")
    lines += [FENCE, rec["content"]]
    return "\n".join(lines) + "\n"


def render_edge(edge: Record) -> str:
    lines = [
        FENCE,
        f"id: {scalar(edge['id'])}",
        f"type: {edge['type'].upper()}",
        f"namespace: {scalar(edge['namespace'])}",
        f"from_id: {scalar(edge['from_id'])}",
        f"from_title: {quote(edge['from_title'])}",
        f"to_id: {scalar(edge['to_id'])}",
        f"to_title: {quote(edge['to_title'])}",
        f"strength: {scalar(edge['strength'])}",
        f"created: {edge['created']}",
        f"updated: {edge['created']}",
        FENCE,
    ]
    return "\n".join(lines) + "\n" + (f"{edge['context']}\n" if edge["context"] else "")


_KEY_LINE = re.compile(r"^([A-Za-z_][\w-]*): (.+)$")
_ITEM_LINE = re.compile(r"^(- |  )([A-Za-z_][\w-]*): (.+)$")
_NUMBER = re.compile(r"^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$")
_WORD = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")
_YAML_WORDS = {"yes", "no", "on", "off", "y", "n", "true", "false", "null"}
_NOT_FAST = object()


def _fast_value(text: str) -> Any:
    """A value as memsys writes it (JSON, a number, a bare word, a timestamp), or _NOT_FAST."""
    if text[0] in '"[{':
        try:
            return loads(text)  # a key given twice: YAML's loader names it
        except ValueError:
            return _NOT_FAST
    if text in ("true", "false"):
        return text == "true"
    if text == "null":
        return None
    if _NUMBER.match(text):
        return float(text) if any(c in text for c in ".eE") else int(text)
    if _TIME.match(text) or (_WORD.match(text) and text.lower() not in _YAML_WORDS):
        return text
    return _NOT_FAST


def _fast(lines: list[str]) -> dict[str, Any] | None:
    """Frontmatter in the one-key-per-line form memsys writes, parsed without YAML (several
    times faster: lint reads 100k files); None when the file needs the YAML parser."""
    data: dict[str, Any] = {}
    items: list[dict[str, Any]] | None = None
    for line in lines:
        if not line.startswith((" ", "-")):  # a top-level key
            if line.rstrip() == "relations:" and "relations" not in data:
                items = data["relations"] = []
                continue
            top = _KEY_LINE.match(line)
            if top is None:
                return None
            value = _fast_value(top.group(2).rstrip())
            if value is _NOT_FAST or top.group(1) in data:
                return None
            data[top.group(1)] = value
            items = None
            continue
        item = _ITEM_LINE.match(line)
        if item is None or items is None or (item.group(1) == "  " and not items):
            return None
        if item.group(1) == "- ":
            items.append({})
        value = _fast_value(item.group(3).rstrip())
        if value is _NOT_FAST or item.group(2) in items[-1]:
            return None
        items[-1][item.group(2)] = value
    return data


class BadFile(ValueError):
    """A file that is not frontmatter + body; `line` is where (1-based)."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line


def split(text: str) -> tuple[dict[str, Any], dict[str, int], str]:
    """(frontmatter, line of each top-level key, body) of a markdown file."""
    lines = text.split("\n")
    if not lines or lines[0].strip() != FENCE:
        raise BadFile("no YAML frontmatter: the file must start with a --- line", 1)
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].rstrip() == FENCE)
    except StopIteration:
        raise BadFile("the frontmatter has no closing --- line", 1) from None
    head = "\n".join(lines[1:end])
    data = _fast(lines[1:end])
    try:
        if data is None:
            data = yaml.load(head, Loader=_Loader)  # a safe loader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 2 if mark is not None else 1
        reason = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise BadFile(f"invalid YAML frontmatter: {reason}", line) from None
    if not isinstance(data, dict):
        raise BadFile("the frontmatter is not a mapping of fields", 2)
    key_lines = {"": 1}
    for i in range(1, end):
        line = lines[i]
        if line and line[0] not in " -#" and ":" in line:
            key_lines.setdefault(line.split(":", 1)[0].strip(), i + 1)
    if "relations" in key_lines:
        key_lines.update(_item_lines(lines, key_lines["relations"], end))
    return data, key_lines, "\n".join(lines[end + 1 :])


_ITEM_KEY = re.compile(r"([A-Za-z_][\w-]*)\s*:(?:\s|$)")


def _item_lines(lines: list[str], start: int, end: int) -> dict[str, int]:
    """The line of each item of the block list whose key is on line `start` (`relations:`)
    and of each key of an item, as {"relations[n]": line, "relations[n].key": line}: a
    relation spans several lines. A flow list (`[{…}]`) has none: its key's line is used."""
    found: dict[str, int] = {}
    n, dash, keys_at = -1, -1, -1
    for i in range(start, end):  # lines[start] is the line after `relations:`
        line = lines[i]
        if line[:1] not in ("", " ", "-", "#"):  # the next top-level key
            break
        indent = len(line) - len(line.lstrip(" "))
        rest = line[indent:]
        if rest.startswith("- ") and dash in (-1, indent):  # an item, not a nested list
            dash, n = indent, n + 1
            keys_at = indent + 2 + len(rest[2:]) - len(rest[2:].lstrip(" "))
            found[f"relations[{n}]"] = i + 1
            rest, indent = rest[2:].lstrip(" "), keys_at
        key = _ITEM_KEY.match(rest)
        if n >= 0 and indent == keys_at and key is not None:
            found.setdefault(f"relations[{n}].{key.group(1)}", i + 1)
    return found


def located(record: Record, source: str, lines: dict[str, int]) -> Located:
    out = Located(record)
    out.source, out.lines = source, lines
    return out


MEMORY_FIELDS: tuple[str, ...] = ("id", "type", "namespace", "tags", "importance", "confidence")
MEMORY_FIELDS += ("lifecycle", "stage", "pinned", "metadata", "happened", "created", "updated")
# Written for people and derived again on every export (the title from the content or
# metadata.title, an edge's titles and its id from its ends): read, not stored.
DERIVED_FIELDS = {"memory": ("title", "relations"), "edge": ("id", "from_title", "to_title")}
EDGE_FIELDS = ("type", "namespace", "from_id", "to_id", "strength", "created", "updated")
RELATION_FIELDS = ("target", "type", "direction", "strength", "context", "edge_id")


def _unknown(data: dict[str, Any], known: tuple[str, ...], taken: Record) -> dict[str, Any]:
    """Fields a file holds that memsys does not read: kept in the record, so that the
    record's check refuses each by name (a misspelt `tag:` would lose the tags). One named
    like a field the record has from elsewhere (`content:` in a frontmatter, `kind:`) is
    kept beside it, never over it; so is one named like a mark memsys's readers set
    (`unedited`, `happened_unknown`: taken for the mark, it would skip the memory's edit)."""
    return {
        (f"{k} (in the frontmatter)" if str(k) in taken or str(k) in READER_KEYS else str(k)): v
        for k, v in data.items()
        if k not in known
    }


def parse_memory(text: str, source: str, pinned_dir: bool) -> list[Located]:
    """A memory file's memory record, and an edge record per relation."""
    data, lines, body = split(text)
    rec: dict[str, Any] = {"kind": "memory", "content": body}
    rec.update({k: data[k] for k in MEMORY_FIELDS if k in data})
    rec.update(_unknown(data, MEMORY_FIELDS + DERIVED_FIELDS["memory"], rec))
    rec.setdefault("pinned", pinned_dir)
    found = [located(rec, source, lines)]
    relations = data.get("relations") or []
    if not isinstance(relations, list):
        relations = [relations]
    for n, rel in enumerate(relations):
        item = f"relations[{n}]"
        where = {"": lines.get(item, lines.get("relations", 1))}
        for key in rel if isinstance(rel, dict) else ():  # each problem at its key's line
            if f"{item}.{key}" in lines:
                names = ("from_id", "to_id") if key == "target" else (str(key),)
                where.update(dict.fromkeys(names, lines[f"{item}.{key}"]))
        if not isinstance(rel, dict):
            found.append(located({"kind": "edge", "type": None}, source, where))
            continue
        # An incoming relation is the other memory's outgoing one: the same edge (one id),
        # kept once however many files name it.
        incoming = str(rel.get("direction", "outgoing")).lower() == "incoming"
        ends = (
            (rel.get("target"), rec.get("id")) if incoming else (rec.get("id"), rel.get("target"))
        )
        edge = {
            "kind": "edge",
            "namespace": rec.get("namespace", "global"),
            "type": rel.get("type"),
            "from_id": ends[0],
            "to_id": ends[1],
            "strength": rel.get("strength", 1.0),
            "context": rel.get("context"),
            "created": rec.get("updated", rec.get("created")),
            "from_relation": True,
        }
        edge.update(_unknown(rel, RELATION_FIELDS, edge))
        if str(rel.get("direction", "outgoing")).lower() not in ("outgoing", "incoming"):
            edge["direction"] = rel["direction"]  # refused by name: neither way round
        found.append(located(edge, source, where))
    return found


def parse_edge(text: str, source: str) -> Located:
    data, lines, body = split(text)
    rec = {
        "kind": "edge",
        "namespace": data.get("namespace", "global"),
        "type": data.get("type"),
        "from_id": data.get("from_id"),
        "to_id": data.get("to_id"),
        "strength": data.get("strength", 1.0),
        "context": body.strip() or None,
        "created": data.get("created"),
    }
    rec.update(_unknown(data, EDGE_FIELDS + DERIVED_FIELDS["edge"], rec))
    return located(rec, source, lines)
