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


def _frontmatter(path: Path, findings: list[Finding]) -> int:
    lines = path.read_text(encoding="utf-8-sig").split("\n")
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
            lines[at] = text
        elif not any(line.startswith(f"{key}:") for line in lines[1:end]):
            added.append(text)
    lines[end:end] = added
    path.write_text("\n".join(lines), encoding="utf-8")
    return len(findings)


def _json_lines(path: Path, findings: list[Finding]) -> int:
    lines = path.read_text(encoding="utf-8-sig").split("\n")
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
        lines[f.line - 1] = json.dumps(record, ensure_ascii=False) + ("," if comma else "")
        done += 1
    path.write_text("\n".join(lines), encoding="utf-8")
    return done
