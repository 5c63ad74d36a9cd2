"""S000's deterministic entity keys: built from what an observation says, and checked when a
caller names an entity with one (`err#…`, `dep#…`), so the same thing always gets the same
entity and a malformed key is refused.

| type | key |
|---|---|
| Run | `run#<ISO8601 UTC>#<fp8>`, fp8 = sha256(cmd\\|cwd\\|exit\\|stdoutHead\\|stderrHead)[:8] |
| Command | `cmd#<cmd, whitespace collapsed, at most 120 chars>#<fp8>` (the same fp8) |
| Error / Warning | `err#<normalizedKey>` / `warn#<normalizedKey>` (`normalized_key`) |
| Dependency | `dep#<name>` or `dep#<name>@<version>` |
| Fix | `fix#<issueName>#<sha8(JSON{changes, strategy})>` |
| Outcome | `outcome#<status>#<sha8(JSON{durationToVerify, fixId, verificationMethod})>` |
| Doc | `doc#<sha256(url)>` |
| Mode / Tool | `mode#<slug>[@ver]` / `tool#<name>[@ver]` |
| File / Concept | `file#<path>` / `concept#<slug>` |

JSON here is canonical (keys sorted, no spaces, UTF-8), so every client hashes the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime
from typing import Any

# prefix → S000 entity type (lowercase, as entityType compares)
TYPES: dict[str, str] = {
    "run": "run",
    "cmd": "command",
    "err": "error",
    "warn": "warning",
    "dep": "dependency",
    "fix": "fix",
    "outcome": "outcome",
    "doc": "doc",
    "mode": "mode",
    "tool": "tool",
    "file": "file",
    "concept": "concept",
}
OUTCOME_STATUSES = ("verified_successful", "failed", "partially_effective")
MAX_CMD = 120

_HASH = re.compile(
    r"\b(?:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    r"|(?:0x)?(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,})\b"
)
_SEMVER = re.compile(r"\bv?\d+\.\d+\.\d+(?:-[0-9a-z.-]+)?(?:\+[0-9a-z.-]+)?\b")
_FP = r"[0-9a-f]{8}"
_VERSIONED = r"[^@\s#]+(?:@[^@\s#]+)?"
_SHAPES: dict[str, re.Pattern[str]] = {
    "run": re.compile(rf"^run#(?P<ts>[^#]+)#{_FP}$"),
    "cmd": re.compile(rf"^cmd#(?P<body>.+)#{_FP}$", re.S),
    "err": re.compile(r"^err#(?P<body>.+)$", re.S),
    "warn": re.compile(r"^warn#(?P<body>.+)$", re.S),
    "dep": re.compile(rf"^dep#{_VERSIONED}$"),
    "fix": re.compile(rf"^fix#\S.*#{_FP}$"),
    "outcome": re.compile(rf"^outcome#(?:{'|'.join(OUTCOME_STATUSES)})#{_FP}$"),
    "doc": re.compile(r"^doc#[0-9a-f]{64}$"),
    "mode": re.compile(r"^mode#[a-z0-9][a-z0-9._-]*(?:@[^@\s#]+)?$"),
    "tool": re.compile(rf"^tool#{_VERSIONED}$"),
    "file": re.compile(r"^file#\S(?:.*\S)?$"),
    "concept": re.compile(r"^concept#[a-z0-9]+(?:-[a-z0-9]+)*$"),
}
_FORMS = {
    "run": "run#<ISO8601>#<fp8>",
    "cmd": "cmd#<canonical-cmd>#<fp8>",
    "err": "err#<normalizedKey>",
    "warn": "warn#<normalizedKey>",
    "dep": "dep#<name>@<version?>",
    "fix": "fix#<issueName>#<sha8>",
    "outcome": f"outcome#<{'|'.join(OUTCOME_STATUSES)}>#<sha8>",
    "doc": "doc#<sha256(url)>",
    "mode": "mode#<slug@ver?>",
    "tool": "tool#<name@ver?>",
    "file": "file#<path>",
    "concept": "concept#<slug>",
}


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def normalized_key(message: str) -> str:
    """S000: lowercase(message) → strip hashes → collapse semver → squeeze spaces. Hashes are
    UUIDs and hex runs of 7+ characters with a digit and a letter (git shas, digests);
    versions (1.2.3, v1.2.3-beta+4) collapse to `x.y.z`."""
    text = message.lower()
    text = _HASH.sub("", text)
    text = _SEMVER.sub("x.y.z", text)
    return " ".join(text.split())


def canonical_cmd(cmd: str) -> str:
    return " ".join(cmd.split())[:MAX_CMD].strip()


def fp8(
    cmd: str, cwd: str | None, exit_code: int | None, stdout: str | None, stderr: str | None
) -> str:
    parts = [
        cmd,
        cwd or "",
        "" if exit_code is None else str(exit_code),
        stdout or "",
        stderr or "",
    ]
    return sha("|".join(parts))[:8]


def iso_utc(ts: datetime) -> str:
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=UTC)
    return ts.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def slug(text: str) -> str:
    return "-".join(re.findall(r"[a-z0-9]+", text.lower()))


def run_key(ts: datetime, fp: str) -> str:
    return f"run#{iso_utc(ts)}#{fp}"


def cmd_key(cmd: str, fp: str) -> str:
    return f"cmd#{canonical_cmd(cmd)}#{fp}"


def err_key(message: str) -> str:
    return f"err#{normalized_key(message)}"


def warn_key(message: str) -> str:
    return f"warn#{normalized_key(message)}"


def dep_key(name: str, version: str | None = None) -> str:
    return f"dep#{name.strip()}" + (f"@{version.strip()}" if version else "")


def fix_key(issue_name: str, strategy: str, changes: list[Any]) -> str:
    digest = sha(canonical_json({"strategy": strategy, "changes": changes}))[:8]
    return f"fix#{issue_name.strip()}#{digest}"


def outcome_key(status: str, fix_id: str, method: str, duration: Any) -> str:
    payload = {"fixId": fix_id, "verificationMethod": method, "durationToVerify": duration}
    return f"outcome#{status}#{sha(canonical_json(payload))[:8]}"


def doc_key(url: str) -> str:
    return f"doc#{sha(url.strip())}"


def versioned(prefix: str, name: str, version: str | None = None) -> str:
    return f"{prefix}#{name.strip()}" + (f"@{version.strip()}" if version else "")


def file_key(path: str) -> str:
    return f"file#{path.strip()}"


def concept_key(name: str) -> str:
    return f"concept#{slug(name)}"


def prefix_of(name: str) -> str | None:
    head, sep, _ = name.partition("#")
    return head if sep and head in TYPES else None


def type_of(name: str) -> str | None:
    """The S000 entity type a stable key names (None: not an S000 key)."""
    prefix = prefix_of(name)
    return TYPES[prefix] if prefix else None


def check(name: str) -> str | None:
    """Validate a name that uses an S000 prefix; returns its entity type, None for a plain
    name, or raises ValueError saying what the key should look like."""
    prefix = prefix_of(name)
    if prefix is None:
        return None
    match = _SHAPES[prefix].match(name)
    problem = None if match else f"it must look like {_FORMS[prefix]}"
    if match and prefix == "run":
        try:
            datetime.fromisoformat(match["ts"].replace("Z", "+00:00"))
        except ValueError:
            problem = f"{match['ts']!r} is not an ISO 8601 time"
    elif match and prefix == "cmd" and match["body"] != canonical_cmd(match["body"]):
        problem = f"the command must be collapsed and at most {MAX_CMD} characters"
    elif match and prefix in ("err", "warn") and match["body"] != normalized_key(match["body"]):
        problem = f"the key is not normalised (expected {prefix}#{normalized_key(match['body'])})"
    if problem:
        raise ValueError(f"Malformed {TYPES[prefix]} key {name!r}: {problem}")
    return TYPES[prefix]
