"""Export the live database: a JSON document, JSON lines, or the S003 markdown vault.

Everything streams from `live` a page at a time, so the size of the store never sits in
memory. The same database always gives the same bytes (fixed order, fixed formatting, no
export time inside), which is what lets a vault live in git and a round trip be checked.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from sqlalchemy.orm import Session

from memsys import regular_files
from memsys.errors import InvalidInput
from memsys.services import briefs as summaries
from memsys.vault import files, live, markdown
from memsys.vault.records import FORMAT, SCHEMA_VERSION, Record

# S003's derived files: runtime state, index, embeddings, provider config stay out of git.
GITIGNORE = "_state.json\n_index.json\n_embeddings.json\n_config.json\n"

# The lifecycle's summaries (memsys.services.briefs): a function (session, namespace) ->
# [(relative path, text)]. They are derived files (files.DERIVED), never read back on import.
Briefs = Callable[[Session, str | None], Iterable[tuple[str, str]]]


def lifecycle_briefs(session: Session, namespace: str | None) -> Iterator[tuple[str, str]]:
    """CORE.md and REFLECTION.md as S003 shows them, as of now."""
    now = datetime.now(UTC)
    yield "CORE.md", summaries.core_brief(session, namespace, now)
    yield "REFLECTION.md", summaries.reflection_brief(session, namespace, now)


briefs: Briefs | None = lifecycle_briefs


@dataclass
class Exported:
    memories: int = 0
    edges: int = 0
    preferences: int = 0
    files: int = 0
    bytes: int = 0
    written: set[str] = field(default_factory=set)


def to_stream(
    session: Session, out: TextIO, form: str, namespace: str | None = None
) -> dict[str, int]:
    """Write the JSON document or JSON lines of the database; returns records by kind."""
    return files.write(out, form, live.records(session, namespace))


class _Writer:
    def __init__(self, root: Path) -> None:
        self.root, self.done = root, Exported()

    def write(self, relative: str, text: str) -> None:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        data = text.encode("utf-8")
        # git sees only real changes; a pipe or device in the way is refused, never opened.
        if not path.exists() or regular_files.read_bytes(path, relative) != data:
            path.write_bytes(data)
        self.done.written.add(relative)
        self.done.files += 1
        self.done.bytes += len(data)

    def free(self, make: Callable[[int], str]) -> str:
        """The first path `make(length)` gives that no other record took (6 hex, then more)."""
        for length in (6, 10, 16, 64):
            candidate = make(length)
            if candidate not in self.done.written:
                return candidate
        raise AssertionError("sha256 collision")


def check_target(root: Path) -> None:
    """Write only into an empty folder or an earlier memsys vault: never over other files."""
    if root.exists() and not root.is_dir():
        raise InvalidInput(f"{root} is a file: give a folder for a vault export")
    if root.is_dir() and any(root.iterdir()) and not (root / files.MANIFEST).exists():
        raise InvalidInput(
            f"{root} is not empty and is not a memsys vault (no {files.MANIFEST}): "
            "export into an empty folder or an earlier export"
        )


def to_vault(
    session: Session, root: Path, namespace: str | None = None, with_briefs: Briefs | None = None
) -> Exported:
    """Write the vault; files of memories that are gone from the database are removed."""
    check_target(root)
    _same_scope(root, namespace)
    root.mkdir(parents=True, exist_ok=True)
    w = _Writer(root)
    linked: dict[str, str] = {}
    manifest = {"format": "memsys-vault", "schema_version": SCHEMA_VERSION, "export": FORMAT}
    w.write(files.MANIFEST, "".join(f"{k}: {json.dumps(v)}\n" for k, v in manifest.items()))
    w.write(".gitignore", GITIGNORE)
    placed = _placed_by_hand(root)
    for page in live.memories(session, namespace):
        relations: dict[str, list[Record]] = {}
        for edge in live.edges_of(session, page):
            for end in (edge["from_id"], edge["to_id"]):
                relations.setdefault(end, []).append(edge)
        for rec in page:
            path = w.free(lambda n, r=rec: markdown.memory_path(r, n))  # type: ignore[misc]
            path = _kept_place(root, path, placed.get(("memory", rec["id"])))
            w.write(path, markdown.render_memory(rec, relations.get(rec["id"], [])))
            w.done.memories += 1
            # The briefs link a memory by the lifecycle's path rule; point them at this file.
            linked[summaries.memory_path(rec["type"], rec["content"], rec["id"])] = path
    for edge in live.edges(session, namespace):
        path = w.free(lambda n, e=edge: markdown.edge_path(e, n))  # type: ignore[misc]
        path = _kept_place(root, path, placed.get(("edge", edge["id"])))
        w.write(path, markdown.render_edge(edge))
        w.done.edges += 1
    prefs = [f"- {files.dumps(p)}\n" for p in live.preferences(session, namespace)]
    w.done.preferences = len(prefs)
    header = "# memsys preferences: one per line (namespace, key, value as JSON, lifecycle)\n"
    w.write(files.PREFERENCES_FILE, header + "".join(prefs))
    hook = with_briefs if with_briefs is not None else briefs
    for relative, text in hook(session, namespace) if hook else ():
        w.write(relative, _relinked(text, linked))
    kept = {placed[key] for key in placed if placed[key] in w.done.written}
    _remove_stale(root, w.done.written, namespace, kept)
    return w.done


def _placed_by_hand(root: Path) -> dict[tuple[str, str], str]:
    """(kind, id) → path of the memory and edge files the last export did not write: renamed
    or moved by hand (Obsidian renames a note with its title), or written by hand."""
    if not root.is_dir():
        return {}
    before = set(_previous(root).get("paths", []))
    placed: dict[tuple[str, str], str] = {}
    for path, role in files.vault_files(root):
        relative = path.relative_to(root).as_posix()
        if relative in before or path.is_symlink() or not path.is_file():
            continue
        ident = _file_id(path)  # unreadable: import reports it
        if ident is not None:
            placed.setdefault(("edge" if role == "edge" else "memory", ident), relative)
    return placed


def _file_id(path: Path) -> str | None:
    try:
        ident = markdown.split(path.read_text(encoding="utf-8-sig"))[0].get("id")
    except (ValueError, OSError, RecursionError):
        return None
    return ident if isinstance(ident, str) else None


def _kept_place(root: Path, standard: str, by_hand: str | None) -> str:
    """Where a record's file goes: where the user moved it, unless the file at its standard
    path is still there (then the other is a copy, and import names both)."""
    if by_hand is None or (root / standard).exists():
        return standard
    return by_hand


_LINK = re.compile(r"\]\((graph/[^)\s]+\.md)\)")


def _relinked(text: str, linked: dict[str, str]) -> str:
    """Markdown links to memories, rewritten to the files this export wrote."""
    return _LINK.sub(lambda m: f"]({linked.get(m.group(1), m.group(1))})", text)


INDEX = "_index.json"  # derived, gitignored: the paths the last export wrote


def _previous(root: Path) -> dict[str, Any]:
    try:
        found = json.loads(regular_files.read_bytes(root / INDEX))
    except (OSError, ValueError, InvalidInput):
        return {}
    return found if isinstance(found, dict) else {}


def _same_scope(root: Path, namespace: str | None) -> None:
    """An export of one namespace over a vault of another scope would drop that scope's
    files: refused."""
    before = _previous(root)
    if before and before.get("namespace") != namespace:
        held = before.get("namespace") or "every namespace"
        raise InvalidInput(
            f"{root} holds an export of {held}: export the same scope into it, or use "
            "another folder"
        )


def _remove_stale(root: Path, written: set[str], namespace: str | None, by_hand: set[str]) -> None:
    """Files the previous export wrote whose records are gone. A file written by hand (not in
    the previous export's index) is never removed: it may be a memory not imported yet. Nor
    is one whose record this export wrote where the user put a copy of it (`by_hand`): of
    two files of one id, export removes neither (import names both)."""
    before = set(_previous(root).get("paths", []))
    moved = {_file_id(root / p) for p in by_hand} - {None}
    for relative in sorted(before - written):
        path = root / relative
        if path.is_file() and path.resolve().is_relative_to(root.resolve()):
            if moved and _file_id(path) in moved:
                continue
            path.unlink()
    listing: dict[str, Any] = {"version": 1, "namespace": namespace, "count": len(written)}
    listing["paths"] = sorted(written)
    (root / INDEX).write_text(json.dumps(listing, indent=0) + "\n", encoding="utf-8")
