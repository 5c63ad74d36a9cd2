"""Export the live database: a JSON document, JSON lines, or the S003 markdown vault.

Everything streams from `live` a page at a time, so the size of the store never sits in
memory. The same database always gives the same bytes (fixed order, fixed formatting, no
export time inside), which is what lets a vault live in git and a round trip be checked.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Any, TextIO

from sqlalchemy.orm import Session

from memsys import regular_files
from memsys.errors import InvalidInput
from memsys.jsonvalue import same
from memsys.services import briefs as summaries
from memsys.vault import files, jsonforms, live, markdown, records
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
    digests: dict[str, str] = field(default_factory=dict)  # path → sha256 of what was written
    preference_lines: list[str] = field(default_factory=list)  # files.preference_lines


def to_stream(
    session: Session, out: TextIO, form: str, namespace: str | None = None
) -> dict[str, int]:
    """Write the JSON document or JSON lines of the database; returns records by kind."""
    return jsonforms.write(out, form, live.records(session, namespace))


class _Writer:
    def __init__(self, root: Path) -> None:
        self.root, self.done = root, Exported()

    def write(self, relative: str, text: str, held: str | None = None) -> None:
        """Write `relative`; `held`: the digest of what the file holds now, when already
        read (_Places.edited), so that it is not read a second time."""
        data = text.encode("utf-8")
        digest = files.digest(data)
        _write(self.root, relative, data, None if held is None else held == digest)
        self.done.written.add(relative)
        self.done.digests[relative] = digest
        self.done.files += 1
        self.done.bytes += len(data)

    def free(self, make: Callable[[int], str], avoid: Iterable[str] = ()) -> str:
        """The first path `make(length)` gives that no other record took (6 hex, then more),
        nor one of `avoid`."""
        for length in (6, 10, 16, 64):
            candidate = make(length)
            if candidate not in self.done.written and candidate not in avoid:
                return candidate
        raise AssertionError("sha256 collision")


def _vault_path(root: Path, relative: str) -> Path:
    """root/relative, a path inside the vault (no `..`) with no link on the way: a vault
    cloned from git may hold links, and writing through one would write wherever it points
    (outside the vault, outside MEMSYS_INDEX_ROOTS for a server). Refused with the link's
    path, never followed (as import and lint refuse to read through one)."""
    rel = PurePosixPath(relative)
    if rel.is_absolute() or ".." in rel.parts or not rel.parts:
        raise InvalidInput(f"{root / relative}: not inside the vault {root}: not written")
    path = root
    for part in rel.parts:
        path = path / part
        if path.is_symlink():
            raise InvalidInput(
                f"{path}: a link (which may point outside the vault): export writes no file "
                "through a link; remove it, or export into another folder"
            )
    return path


def _write(root: Path, relative: str, data: bytes, same: bool | None = None) -> None:
    """`data` into root/relative unless the file holds it already (`same`, when the caller
    knows; else read and compared)."""
    path = _vault_path(root, relative)
    path.parent.mkdir(parents=True, exist_ok=True)
    if same is None:  # git sees only real changes; a pipe or device is refused, never opened
        same = path.exists() and regular_files.read_bytes(path, relative) == data
    if same:
        return
    # O_NOFOLLOW: a link put there since the check above is refused too (ELOOP).
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o666)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def _no_links(root: Path) -> None:
    """Refuse, before writing anything, a vault whose files export writes at a fixed name
    (manifest, .gitignore, preferences, briefs, index) or whose folders import reads are
    links (a link on the way to a memory's file is refused when it is written)."""
    for folder in files.linked_folders(root):
        _vault_path(root, folder)
    for relative in (files.MANIFEST, ".gitignore", files.PREFERENCES_FILE, INDEX, *files.DERIVED):
        _vault_path(root, relative)


def _no_pending_preferences(root: Path, text: str) -> None:
    """Refuse, before writing anything, to write over a preferences file edited since the
    last export whose preferences are not the database's (an edit not imported yet): one
    file holds them all, so there is no writing the database's beside it."""
    digests = files.vault_index(root).get("digests")
    known = digests.get(files.PREFERENCES_FILE) if isinstance(digests, dict) else None
    path = root / files.PREFERENCES_FILE
    if known is None or not path.is_file() or path.is_symlink():
        return
    data = regular_files.read_bytes(path, files.PREFERENCES_FILE)
    if files.digest(data) == known:
        return

    def lines(body: str) -> list[str]:
        kept = (line.strip() for line in body.split("\n"))
        return sorted(x for x in kept if x and not x.startswith("#"))

    if lines(data.decode("utf-8-sig", errors="replace")) != lines(text):
        raise InvalidInput(
            f"{path} was edited since the last export and its edits are not imported: "
            f"import the vault first (memsys import {root}), or export into another folder"
        )


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
    if root.is_dir():
        _no_links(root)
    _same_scope(root, namespace)
    root.mkdir(parents=True, exist_ok=True)
    live.snapshot(session)  # memories, edges, preferences and briefs as of one moment
    prefs = [f"- {jsonforms.dumps(p)}\n" for p in live.preferences(session, namespace)]
    header = "# memsys preferences: one per line (namespace, key, value as JSON, lifecycle)\n"
    _no_pending_preferences(root, header + "".join(prefs))
    w = _Writer(root)
    linked: dict[str, str] = {}
    manifest = {"format": "memsys-vault", "schema_version": SCHEMA_VERSION, "export": FORMAT}
    w.write(files.MANIFEST, "".join(f"{k}: {json.dumps(v)}\n" for k, v in manifest.items()))
    w.write(".gitignore", GITIGNORE)
    places = _Places(root)
    for page in live.memories(session, namespace):
        relations: dict[str, list[Record]] = {}
        for edge in live.edges_of(session, page):
            for end in (edge["from_id"], edge["to_id"]):
                relations.setdefault(end, []).append(edge)
        for rec in page:
            make = partial(markdown.memory_path, rec)
            rendered = markdown.render_memory(rec, relations.get(rec["id"], []))
            path = places.beside_edits(rec, places.of(rec, w.free(make)), w, make, rendered)
            w.write(path, rendered, places.current.get(path))
            places.wrote(rec, path)
            w.done.memories += 1
            # The briefs link a memory by the lifecycle's path rule; point them at this file.
            linked[markdown.memory_path(rec)] = path
    for edge in live.edges(session, namespace):
        make = partial(markdown.edge_path, edge)
        path = places.beside_edits(edge, places.of(edge, w.free(make)), w, make)
        w.write(path, markdown.render_edge(edge), places.current.get(path))
        places.wrote(edge, path)
        w.done.edges += 1
    w.done.preferences = len(prefs)
    w.done.preference_lines = files.preference_lines("".join(prefs))
    w.write(files.PREFERENCES_FILE, header + "".join(prefs))
    hook = with_briefs if with_briefs is not None else briefs
    for relative, text in hook(session, namespace) if hook else ():
        w.write(relative, _relinked(text, linked))
    _remove_stale(root, w.done, namespace, places)
    return w.done


class _Places:
    """Where each record's file goes. Its standard path, unless the user renamed or moved
    the file (Obsidian renames a note with its title): then where they put it — a file an
    earlier export placed there (the index remembers), or a file of that id written or
    moved by hand whose record is the database's (one holding edits not imported yet is
    left as it is: the standard file is written beside it and import names both)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        before = files.vault_index(root)
        paths = before.get("paths")  # a derived file: what is usable of it, as of `ids` below
        listed = paths if isinstance(paths, list) else []
        self.indexed: set[str] = {p for p in listed if isinstance(p, str)}
        ids = before.get("ids")
        self.placed: dict[str, str] = dict(ids) if isinstance(ids, dict) else {}
        self.by_hand = self._by_hand() if root.is_dir() else {}
        self.now: dict[str, str] = {}  # key → the path this export wrote
        digests = before.get("digests")
        self.digests: dict[str, str] = dict(digests) if isinstance(digests, dict) else {}
        self.kept: set[str] = set()  # files holding edits not imported: left as they are
        held = before.get("kept")
        self.held: dict[str, str] = dict(held) if isinstance(held, dict) else {}
        self.holding: dict[str, str] = {}  # key → such a file this export left
        self.current: dict[str, str] = {}  # path → digest of what it holds, as edited() read it

    @staticmethod
    def key(rec: Record) -> str:
        return f"{rec['kind']}:{rec['id']}"

    def _by_hand(self) -> dict[str, str]:
        found: dict[str, str] = {}
        for path, role in files.vault_files(self.root):
            relative = path.relative_to(self.root).as_posix()
            if relative in self.indexed or path.is_symlink() or not path.is_file():
                continue
            ident = _file_id(path)  # unreadable: import reports it
            if ident is not None:
                found.setdefault(f"{'edge' if role == 'edge' else 'memory'}:{ident}", relative)
        return found

    def of(self, rec: Record, standard: str) -> str:
        if (self.root / standard).exists():
            return standard
        key = self.key(rec)
        kept = self.held.get(key)  # a file left for its edits last time, imported since or not
        if isinstance(kept, str) and kept in self.indexed and self._holds(kept, rec):
            return kept
        earlier = self.placed.get(key)
        if isinstance(earlier, str) and earlier in self.indexed and self._holds(earlier, rec):
            return earlier
        moved = self.by_hand.get(key)
        if moved is not None and self._holds(moved, rec) and _same(self.root / moved, rec):
            return moved
        return standard

    def edited(self, relative: str) -> bool:
        """Whether a file an earlier export wrote was changed since (its bytes are not the
        ones written then)."""
        known = self.digests.get(relative)
        try:
            path = _vault_path(self.root, relative)
            if known is None or not path.is_file() or path.is_symlink():
                return False
            self.current[relative] = files.digest(regular_files.read_bytes(path, relative))
        except (OSError, InvalidInput):
            return False
        return self.current[relative] != known

    def beside_edits(
        self,
        rec: Record,
        path: str,
        w: _Writer,
        make: Callable[[int], str],
        rendered: str | None = None,
    ) -> str:
        """`path`, unless the file there was edited since the last export and holds other
        than the database's record (an edit not imported yet): that file is left as it is
        and the record is written beside it — import then names both, as for a renamed
        file holding edits — never written over."""
        if not self.edited(path) or _same(self.root / path, rec, rendered):
            return path
        self.kept.add(path)
        self.holding[self.key(rec)] = path
        return w.free(make, avoid={path, *self.kept})

    def _holds(self, relative: str, rec: Record) -> bool:
        try:  # an index naming ../elsewhere.md, or a path through a link: not the vault's
            path = _vault_path(self.root, relative)
        except InvalidInput:
            return False
        return path.is_file() and not path.is_symlink() and _file_id(path) == rec["id"]

    def wrote(self, rec: Record, path: str) -> None:
        self.now[self.key(rec)] = path

    def kept_copies(self) -> set[str | None]:
        """Ids written into a file the user put there: a stale file of one is a copy."""
        theirs = set(self.by_hand.values())
        return {key.split(":", 1)[1] for key, path in self.now.items() if path in theirs}


def _file_id(path: Path) -> str | None:
    try:
        ident = markdown.split(path.read_text(encoding="utf-8-sig"))[0].get("id")
    except (ValueError, OSError, RecursionError):
        return None
    return ident if isinstance(ident, str) else None


def _same(path: Path, rec: Record, rendered: str | None = None) -> bool:
    """Whether a file holds the database's record (what import compares), so that writing
    over it loses nothing; given the memory's `rendered` file, its relations too (a relation
    added or edited in a note's frontmatter is an edit)."""
    try:
        text = path.read_text(encoding="utf-8-sig")
        if rec["kind"] == "edge":
            read = markdown.parse_edge(text, str(path))
        else:
            parsed = markdown.parse_memory(text, str(path), pinned_dir=False)
            read = parsed[0]
            if rendered is not None:
                ours = markdown.parse_memory(rendered, str(path), pinned_dir=False)[1:]
                if _relations(parsed[1:]) != _relations(ours):
                    return False
    except (ValueError, OSError, RecursionError):
        return False
    mine = dict(read)
    if records.check(mine):
        return False
    names = records.VERSIONED if rec["kind"] == "memory" else ("type", "strength", "context")
    return all(same(mine.get(n), rec.get(n)) for n in (*names, "namespace", "created"))


def _relations(found: Iterable[Record]) -> list[tuple[str, ...]]:
    keys = ("from_id", "to_id", "type", "strength", "context")
    return sorted(tuple(repr(r.get(k)) for k in keys) for r in found)


_LINK = re.compile(r"\]\((graph/[^)\s]+\.md)\)")


def _relinked(text: str, linked: dict[str, str]) -> str:
    """Markdown links to memories, rewritten to the files this export wrote."""
    return _LINK.sub(lambda m: f"]({linked.get(m.group(1), m.group(1))})", text)


INDEX = files.INDEX


def note_imported(root: Path, read: dict[str, str]) -> None:
    """After a vault's import committed (every file applied): the index's digests become the
    files' bytes as the import read them (`read`, Snapshot.read) — what they hold is the
    database's, so the next export writes over them as over its own, whatever the database
    did since (an edit imported and then a relation added was kept as an edit not imported,
    with the database's copy beside it). An edit saved while the import ran is not the
    database's: read again after the commit, it was taken for it, skipped by the next
    import as unedited and written over by the next export. A file the import does not read
    (CORE.md) is taken as it is now. The preferences file's lines likewise
    (files.PREFERENCE_LINES), when it still holds what the import read."""
    before = files.vault_index(root)
    digests = before.get("digests")
    if not isinstance(digests, dict) or not digests:
        return
    fresh = dict(digests)
    lines = before.get(files.PREFERENCE_LINES)
    for relative in digests:
        if relative in read:  # "": the import's two passes read other bytes: not imported
            fresh[relative] = read[relative] or digests[relative]
            if relative == files.PREFERENCES_FILE and read[relative]:
                found = _lines_read(root, read[relative])
                lines = lines if found is None else found
            continue
        try:
            path = _vault_path(root, relative)
            if path.is_file() and not path.is_symlink():
                fresh[relative] = files.digest(regular_files.read_bytes(path, relative))
        except (OSError, InvalidInput):
            continue
    if fresh != digests or lines != before.get(files.PREFERENCE_LINES):
        before["digests"] = fresh
        before[files.PREFERENCE_LINES] = lines
        _write(root, INDEX, (json.dumps(before, indent=0) + "\n").encode("utf-8"))


def _lines_read(root: Path, held: str) -> list[str] | None:
    """The preferences file's line digests, if it still holds the bytes of digest `held`."""
    try:
        data = regular_files.read_bytes(_vault_path(root, files.PREFERENCES_FILE))
    except (OSError, InvalidInput):
        return None
    if files.digest(data) != held:
        return None
    return files.preference_lines(data.decode("utf-8-sig", errors="replace"))


def _same_scope(root: Path, namespace: str | None) -> None:
    """An export of one namespace over a vault of another scope would drop that scope's
    files: refused."""
    before = files.vault_index(root)
    if before and before.get("namespace") != namespace:
        held = before.get("namespace") or "every namespace"
        raise InvalidInput(
            f"{root} holds an export of {held}: export the same scope into it, or use "
            "another folder"
        )


def _remove_stale(root: Path, done: Exported, namespace: str | None, places: _Places) -> None:
    """Files the previous export wrote whose records are gone. A file written by hand (not in
    the previous export's index) is never removed: it may be a memory not imported yet. Nor
    is one of a record this export wrote where the user put it: it is a copy (of two files
    of one id, export removes neither, and import names both). Nor one edited since the last
    export (its edit is not imported: the memory may have been forgotten meanwhile); the
    index keeps such files with the digest they were written with, so the next export still
    knows them for edited."""
    copies = places.kept_copies()
    written = done.written
    for relative in sorted(places.indexed - written):
        path = root / relative
        if not files.written_by_export(PurePosixPath(relative)):
            continue
        if path.is_file() and path.resolve().is_relative_to(root.resolve()):
            if copies and _file_id(path) in copies:
                continue
            if places.edited(relative):
                places.kept.add(relative)
                continue
            path.unlink()
    kept = {p: places.digests[p] for p in places.kept - written if p in places.digests}
    listing: dict[str, Any] = {"version": 2, "namespace": namespace, "count": len(written)}
    listing["paths"] = sorted(written | set(kept))
    listing["ids"] = dict(sorted(places.now.items()))
    listing["digests"] = dict(sorted({**done.digests, **kept}.items()))
    listing["kept"] = dict(sorted(places.holding.items()))
    listing[files.PREFERENCE_LINES] = done.preference_lines
    _write(root, INDEX, (json.dumps(listing, indent=0) + "\n").encode("utf-8"))
