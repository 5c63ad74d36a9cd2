"""`memsys lint --fix`: write the safe fixes lint found back into the snapshot's files — one
frontmatter line of a vault file, or one field of a record line of a JSON export — and
nothing else."""

from __future__ import annotations

import json
from pathlib import Path

from memsys.errors import InvalidInput
from memsys.vault import markdown
from memsys.vault.files import Snapshot
from memsys.vault.lint import Finding, Report, fixes_by_file


def apply(snapshot: Snapshot, report: Report) -> int:
    """Write every safe fix; returns how many were written."""
    written = 0
    for source, findings in fixes_by_file(report):
        if snapshot.form == "vault":
            written += _frontmatter(snapshot.path / source, findings)
        else:
            written += _json_lines(Path(source), findings)
    return written


_BOM = "\ufeff"


def _lines(path: Path) -> tuple[str, list[str]]:
    """The file's BOM (or "") and its lines, split at \n with any \r kept: a fix writes
    the file back as it was (a Windows editor's \r\n and BOM too) but for its own lines."""
    text = path.read_bytes().decode("utf-8")
    bom = _BOM if text.startswith(_BOM) else ""
    return bom, text[len(bom) :].split("\n")


def _write(path: Path, bom: str, lines: list[str]) -> None:
    path.write_bytes((bom + "\n".join(lines)).encode("utf-8"))


def _ending(line: str) -> str:
    return "\r" if line.endswith("\r") else ""


def _frontmatter(path: Path, findings: list[Finding]) -> int:
    bom, lines = _lines(path)
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() == markdown.FENCE), None)
    if end is None:
        return 0
    added: list[str] = []
    for f in findings:
        assert f.fix is not None
        key, value = f.fix
        text = f"{key}: {markdown.scalar(value)}"
        at = (f.line or 0) - 1
        if 0 < at < end and lines[at].startswith(f"{key}:"):
            lines[at] = text + _ending(lines[at])
        elif not any(line.startswith(f"{key}:") for line in lines[1:end]):
            added.append(text + _ending(lines[end]))
    lines[end:end] = added
    _write(path, bom, lines)
    return len(findings)


def _json_lines(path: Path, findings: list[Finding]) -> int:
    bom, lines = _lines(path)
    done = 0
    for f in findings:
        assert f.fix is not None and f.line is not None
        raw = lines[f.line - 1]
        comma = raw.rstrip().endswith(",")
        try:
            record = json.loads(raw.rstrip().rstrip(","))
        except json.JSONDecodeError:
            raise InvalidInput(f"{path}:{f.line}: changed since lint read it") from None
        record[f.fix[0]] = f.fix[1]  # the rest as it was: an unknown field stays (reported)
        fixed = json.dumps(record, ensure_ascii=False) + ("," if comma else "")
        lines[f.line - 1] = fixed + _ending(raw)
        done += 1
    _write(path, bom, lines)
    return done
