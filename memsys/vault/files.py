"""Snapshots on disk: a JSON document, JSON lines, or a markdown vault — opened and read
record by record (with file and line for every problem). The JSON forms are read and written
by jsonforms; the vault's files are walked here, with the index of what memsys last wrote.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any, Literal

import yaml

from memsys import regular_files
from memsys.errors import InvalidInput
from memsys.vault import jsonforms, markdown, upgrade
from memsys.vault.jsonforms import Item
from memsys.vault.records import (
    SCHEMA_VERSION,
    UNEDITED,
    Located,
    Problem,
    Record,
)

Form = Literal["json", "jsonl", "vault"]
MANIFEST = "memsys-vault.yaml"
PREFERENCES_FILE = "vault/preferences.yaml"
DERIVED = ("CORE.md", "REFLECTION.md")  # written from the memories, never read back
INDEX = "_index.json"  # derived, gitignored: the paths the last export wrote, and digests
# What makes a folder without a manifest a vault (S003's layout, written by hand).
VAULT_PARTS = ("graph", "vault", "episodes", *DERIVED)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def vault_index(root: Path) -> dict[str, Any]:
    """The vault's index as the last export or import left it; empty without one (a clone of
    a vault repository: the index is not in git) or when it cannot be read."""
    try:
        found = json.loads(regular_files.read_bytes(root / INDEX))
    except (OSError, ValueError, InvalidInput):
        return {}
    return found if isinstance(found, dict) else {}


def written_digests(root: Path, index: dict[str, Any] | None = None) -> dict[str, str]:
    """Path → digest of each vault file as memsys last wrote it (an export) or read it (an
    import that committed); `index`: the vault's index, when already read."""
    digests = (vault_index(root) if index is None else index).get("digests")
    return digests if isinstance(digests, dict) else {}


# The index's key for the digests of the preferences file's lines as memsys last wrote or
# read them: one file holds every preference, so an edit of one line must not make the
# others count as edited too.
PREFERENCE_LINES = "preference_lines"


def line_digest(line: str) -> str:
    return digest(line.strip().encode("utf-8"))


def preference_lines(body: str) -> list[str]:
    """The digests of a preferences file's record lines (comments and blank lines left out),
    sorted and distinct."""
    kept = (line.strip() for line in body.split("\n"))
    return sorted({line_digest(x) for x in kept if x and not x.startswith("#")})


@dataclass
class Snapshot:
    """An opened snapshot: where, which form, which schema version it was written in."""

    path: Path
    form: Form
    version: str
    # A vault's files as items() read them: path → digest of the bytes ("" when two reads,
    # an import's two passes, found other bytes). What an import that committed applied, for
    # export.note_imported: the files read again after the commit may hold a newer edit.
    read: dict[str, str] = field(default_factory=dict)

    def items(self) -> Iterator[Item]:
        """Every record (upgraded to this memsys's schema version) or problem, in file order."""
        if self.form == "vault":
            raw: Iterator[Item] = _vault_items(self.path, self.read)
        else:
            reader = jsonforms.jsonl_items if self.form == "jsonl" else jsonforms.json_items
            raw = reader(self.path)
        step = upgrade.steps_from(self.version)
        for item in raw:
            if isinstance(item, Located):
                for change in step:
                    item = _relocated(change(dict(item)), item)
            yield item


def _relocated(record: Record, old: Located) -> Located:
    return markdown.located(record, old.source, getattr(old, "lines", {}))


def open_snapshot(path: str | Path) -> Snapshot:
    """Open a snapshot; a missing path or a schema version from the future is refused."""
    where = Path(path).expanduser()
    if not where.exists():
        raise InvalidInput(f"Snapshot not found: {path}")
    if where.is_dir():
        form: Form = "vault"
        version, source, line = _vault_version(where)
    else:  # a FIFO would block the read forever; a device never ends
        regular_files.regular_or_missing(where, str(path))
        form, version, source, line = jsonforms.file_version(where)
    upgrade.check_readable(version, f"{source}:{line}")
    return Snapshot(where, form, version)


def _vault_version(root: Path) -> tuple[str, str, int]:
    manifest = root / MANIFEST
    if not present(manifest):  # a plain S003 vault: the current format
        if not any((root / part).exists() for part in VAULT_PARTS):
            # A typo'd path or an empty folder would otherwise import as "0 new".
            raise InvalidInput(
                f"{root} is not a vault: it has no {MANIFEST} and none of {', '.join(VAULT_PARTS)}"
            )
        return SCHEMA_VERSION, str(manifest), 1
    if not manifest.is_file():
        raise InvalidInput(f"{manifest}:1: {regular_files.NOT_REGULAR}")
    if not _inside(manifest, root):
        raise InvalidInput(f"{manifest}:1: a link to a file outside the vault: not read")
    try:
        data = yaml.load(manifest.read_text(encoding="utf-8"), Loader=markdown.SafeLoader) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"{manifest}:1: not valid YAML: {exc}") from None
    if not isinstance(data, dict):  # a list or a word: no schema_version to read
        raise InvalidInput(f"{manifest}:1: expected fields (format, schema_version), not {data!r}")
    return str(data.get("schema_version", "")), str(manifest), 1


def _role(rel: PurePath) -> str | None:
    """What a vault's markdown file is to import: memory, pinned or edge; "" for one it
    leaves out on purpose (hidden, derived, an episode, a repository's own document); None
    for one it does not read though it may look like a note."""
    parts = rel.parts
    if any(p.startswith((".", "_")) for p in parts) or rel.as_posix() in DERIVED:
        return ""
    if parts[0] in ("episodes", "docs"):
        return ""
    if rel.as_posix().startswith(markdown.EDGE_DIR + "/"):
        return "edge"
    if parts[0] == markdown.PINNED_DIR:
        return "pinned"
    if parts[0] == "graph":
        return "memory"
    if len(parts) == 1 and rel.stem.lower() in REPOSITORY_DOCS:
        return ""
    return None


def written_by_export(rel: PurePath) -> bool:
    """Whether an export may have written the file at `rel`: a memory's, an edge's, a brief.
    The only files an export removes when their records are gone (the index naming any
    other, `.git/config`, a note of the user's or an image beside one, is no reason to delete
    it): export writes markdown only, and _role reads a folder, not what the file is."""
    return rel.suffix == ".md" and (bool(_role(rel)) or rel.as_posix() in DERIVED)


def linked_folders(root: Path) -> Iterator[str]:
    """Links to folders where a vault import reads (graph/…, vault/), relative to the vault.
    rglob enters no linked folder, so their files would be passed over without a word, and
    an export would write through them (anywhere the link points)."""
    for top, dirs, _ in os.walk(root):
        here = Path(top).relative_to(root)
        for name in sorted(dirs):
            if _role(here / name / "x.md") and os.path.islink(os.path.join(top, name)):
                yield (here / name).as_posix()
        dirs[:] = [d for d in dirs if _role(here / d / "x.md")]  # .git, episodes, …: not read


def vault_files(root: Path) -> Iterator[tuple[Path, str]]:
    """(path, role) of every file a vault import reads: memory, pinned, edge."""
    for path in sorted(root.rglob("*.md")):
        role = _role(path.relative_to(root))
        if role:
            yield path, role


# A repository's own documents beside a vault: never mistaken for notes.
REPOSITORY_DOCS = {"readme", "changelog", "contributing", "license", "security", "code_of_conduct"}


def unread_notes(root: Path) -> Iterator[str]:
    """Markdown files a vault import never reads (a note at the vault's root, where Obsidian
    creates new ones, or in a folder of its own): the user may think they are memories."""
    for path in sorted(root.rglob("*.md")):
        rel = path.relative_to(root)
        if _role(rel) is None:
            yield rel.as_posix()


def _inside(path: Path, root: Path, resolved_root: Path | None = None) -> bool:
    """Whether `path`, its links followed, is a file of the vault (a link may point anywhere:
    /etc/passwd is not read, and lint --fix never writes through such a link). A file that
    is no link, found by vault_files (rglob enters no linked folder), is the vault's: only
    links are resolved (100k realpath calls were a fifth of a vault's lint)."""
    try:
        if resolved_root is not None and not path.is_symlink():
            return True
        return path.resolve(strict=True).is_relative_to(resolved_root or root.resolve(strict=True))
    except (OSError, RuntimeError):  # a link loop, a dangling link
        return False


LINKED_FOLDER = "a link to a folder: not read (memsys reads and writes no file through one)"


def _noted(read: dict[str, str], relative: str, data: bytes) -> str:
    """The digest of `data`, noted in `read` as what `relative` held ("" once it held other)."""
    held = digest(data)
    if read.setdefault(relative, held) != held:
        read[relative] = ""
    return held


def _vault_items(root: Path, read: dict[str, str]) -> Iterator[Item]:
    resolved_root = root.resolve(strict=True)
    index = vault_index(root)
    written = written_digests(root, index)
    for folder in linked_folders(root):
        yield Problem(folder, None, LINKED_FOLDER)
    for path, role in vault_files(root):
        source = str(path.relative_to(root))
        if not path.is_file():  # a directory named *.md, a pipe, a device: never read
            yield Problem(source, None, regular_files.NOT_REGULAR)
            continue
        if not _inside(path, root, resolved_root):
            yield Problem(source, None, "a link to a file outside the vault: not read")
            continue
        try:
            data = path.read_bytes()
            relative = PurePath(source).as_posix()
            held = _noted(read, relative, data)
            text = data.decode("utf-8-sig")
            found = (
                [markdown.parse_edge(text, source)]
                if role == "edge"
                else markdown.parse_memory(text, source, pinned_dir=role == "pinned")
            )
            if written.get(relative) == held:  # as memsys wrote it: no edit of the user's
                for rec in found:  # a memory and the relations in its frontmatter, or an edge
                    rec[UNEDITED] = True
            yield from found
        except markdown.BadFile as exc:
            yield Problem(source, exc.line, str(exc))
        except UnicodeDecodeError:
            yield Problem(source, None, "not UTF-8 text")
        except ValueError as exc:  # a number of more digits than Python converts, …
            yield Problem(source, None, f"cannot be read: {jsonforms.why(exc)}")
        except RecursionError:
            yield Problem(source, None, "cannot be read: nested too deeply")
    prefs = root / PREFERENCES_FILE
    if present(prefs) and not prefs.is_file():
        yield Problem(PREFERENCES_FILE, None, regular_files.NOT_REGULAR)
    elif present(prefs) and not _inside(prefs, root):
        yield Problem(PREFERENCES_FILE, None, "a link to a file outside the vault: not read")
    elif present(prefs):
        lines = index.get(PREFERENCE_LINES)
        known = {x for x in lines if isinstance(x, str)} if isinstance(lines, list) else set()
        yield from _preference_items(prefs, read, written.get(PREFERENCES_FILE), known)


def present(path: Path) -> bool:
    """Whether the folder holds something by this name: a link that leads nowhere (a loop,
    a missing target) too, which exists() calls absent. Taken for absent, a link loop as
    vault/preferences.yaml imported as a vault without preferences, and as memsys-vault.yaml
    as a vault of the current format, without a word."""
    return path.exists() or path.is_symlink()


def _preference_items(
    path: Path, read: dict[str, str], written: str | None, lines: set[str]
) -> Iterator[Item]:
    """The preferences file's records; a line as memsys last wrote or read it (the whole
    file unedited, or that line: `lines`) is marked so."""
    source = PREFERENCES_FILE
    data = path.read_bytes()
    whole = _noted(read, source, data) == written
    try:
        body = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        yield Problem(source, None, "not UTF-8 text")
        return
    # "\n" only: splitlines() also breaks at U+2028, U+0085, … which a value may hold.
    for n, line in enumerate(body.split("\n"), start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        if not text.startswith("- "):
            yield Problem(source, n, "expected `- {…}`, one preference per line")
            continue
        item = jsonforms.record_line(text[2:], source, n)
        if isinstance(item, Located):
            item["kind"] = "preference"
            if whole or line_digest(text) in lines:
                item[UNEDITED] = True
        yield item
