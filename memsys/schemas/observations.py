"""S000's seven observation envelopes, validated before anything is written ("Validation
Gates"): the type must be one of the seven, its fields present and well-typed, no unknown
field (a typo such as `exitcode` is refused, not dropped), heads of output short (S000 forbids
full stdout/stderr blobs). An observation string that starts with `{` is an envelope.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    TypeAdapter,
    ValidationError,
)

from memsys import jsonvalue
from memsys.schemas.common import Timestamp, check_past, check_values

MAX_HEAD = 2000  # characters of stdout/stderr/excerpt kept in an observation
ENVELOPE_TYPES = (
    "command.exec",
    "error.capture",
    "warning.capture",
    "fix.apply",
    "fix.outcome",
    "doc.note",
    "run.summary",
)

Text = Annotated[str, Field(min_length=1)]
Head = Annotated[str, Field(max_length=MAX_HEAD)]
# JSON's own types, as every memsys input: "0", true or 1.0 is no exit code, 1700000000 no
# time (pydantic's lax mode would take them, and true and 1 would give the same key).
ExitCode = Annotated[StrictInt, Field(ge=-(2**31), le=2**32 - 1)]
Number = StrictInt | StrictFloat
When = Annotated[Timestamp, AfterValidator(check_past)]  # ISO 8601 text, not in the future


class _Envelope(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=False)

    ts: When | None = None  # when it happened (ISO 8601); run keys need it


class CommandExec(_Envelope):
    type: Literal["command.exec"]
    cmd: Text
    cwd: str | None = None
    exitCode: ExitCode
    durationMs: Annotated[StrictInt, Field(ge=0, le=2**53)] | None = None
    stdoutHead: Head | None = None
    stderrHead: Head | None = None


class _Capture(_Envelope):
    normalizedKey: str | None = None  # filled (and checked) from message
    kind: Text
    message: Text
    detector: Text
    context: dict[str, Any] | None = None


class ErrorCapture(_Capture):
    type: Literal["error.capture"]


class WarningCapture(_Capture):
    type: Literal["warning.capture"]


class FixApply(_Envelope):
    type: Literal["fix.apply"]
    strategy: Text
    changes: Annotated[list[str | dict[str, Any]], Field(min_length=1)]
    result: Literal["proposed", "applied"]
    issueName: str | None = None  # the error it fixes: the fix key needs it


class FixOutcome(_Envelope):
    type: Literal["fix.outcome"]
    status: Literal["verified_successful", "failed", "partially_effective"]
    verificationMethod: Text
    durationToVerify: Number | str
    sideEffects: list[str] | str | None = None
    testCoverage: Number | str | None = None
    fixId: str | None = None  # the fix it measures: the outcome key needs it


class DocNote(_Envelope):
    type: Literal["doc.note"]
    url: Annotated[str, Field(pattern=r"^https?://\S+$")]
    title: str | None = None
    site: str | None = None
    author: str | None = None
    published_at: When | None = None
    accessed_at: When
    archive_url: Annotated[str, Field(pattern=r"^https?://\S+$")] | None = None
    excerpt: Head | None = None


class RunSummary(_Envelope):
    type: Literal["run.summary"]
    summary: Text
    cmd: str | None = None
    cwd: str | None = None
    exitCode: ExitCode | None = None
    stdoutHead: Head | None = None
    stderrHead: Head | None = None


Envelope = Annotated[
    CommandExec | ErrorCapture | WarningCapture | FixApply | FixOutcome | DocNote | RunSummary,
    Field(discriminator="type"),
]
_ADAPTER: TypeAdapter[Any] = TypeAdapter(Envelope)


def parse_envelope(data: Any, where: str = "observation") -> Any:
    """An envelope model from a dict or JSON text, or ValueError naming the bad field."""
    if isinstance(data, str):
        try:
            data = jsonvalue.loads(data)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{where} is not valid JSON ({exc.msg} at {exc.pos})") from None
        except RecursionError:  # was a crash: "Internal error", HTTP 500
            raise ValueError(f"{where} is not valid JSON (nested too deeply to read)") from None
        except jsonvalue.KeyTwice as exc:  # json kept the last without a word
            raise ValueError(f"{where} is not valid JSON ({exc})") from None
        except ValueError:  # an integer of more digits than Python converts
            raise ValueError(f"{where} is not valid JSON (a number has too many digits)") from None
        check_values(data, where)  # text read here skips the Input check (NaN, NUL, depth)
    if not isinstance(data, dict):
        raise ValueError(f"{where} must be a JSON object with a type")
    kind = data.get("type")
    if kind not in ENVELOPE_TYPES:
        shown = "missing" if kind is None else repr(kind)
        raise ValueError(
            f"{where}.type: {shown} is not an S000 observation type; use one of: "
            + ", ".join(ENVELOPE_TYPES)
        )
    try:
        envelope = _ADAPTER.validate_python(data)
    except ValidationError as exc:
        parts = []
        for err in exc.errors():
            loc = [str(p) for p in err["loc"] if p != kind]
            parts.append(f"{where}.{'.'.join(loc) or 'type'}: {err['msg']}")
        raise ValueError("; ".join(parts)) from None
    _check_key(envelope, where)
    return envelope


def _check_key(envelope: Any, where: str) -> None:
    from memsys.keys import normalized_key

    if isinstance(envelope, ErrorCapture | WarningCapture):
        expected = normalized_key(envelope.message)
        if envelope.normalizedKey is None:
            envelope.normalizedKey = expected
        elif envelope.normalizedKey != expected:
            raise ValueError(
                f"{where}.normalizedKey: {envelope.normalizedKey!r} is not the S000 "
                f"normalisation of message (expected {expected!r})"
            )


def looks_like_envelope(text: str) -> bool:
    return text.lstrip().startswith("{")


def canonical_text(envelope: Any) -> str:
    """One text per envelope (sorted keys, no nulls): the same envelope is one observation."""
    data = envelope.model_dump(mode="json", exclude_none=True)
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def stable_key(envelope: Any, where: str = "envelope") -> tuple[str, str]:
    """The S000 key and entity type of the thing an envelope is about (memsys.keys)."""
    from memsys import keys

    def need(field: str, form: str) -> Any:
        value = getattr(envelope, field)
        if value is None:
            raise ValueError(f"{where}.{field}: needed for the stable key {form}")
        return value

    if isinstance(envelope, CommandExec):
        fp = keys.fp8(
            envelope.cmd, envelope.cwd, envelope.exitCode, envelope.stdoutHead, envelope.stderrHead
        )
        return keys.cmd_key(envelope.cmd, fp), "command"
    if isinstance(envelope, ErrorCapture):
        return keys.err_key(envelope.message), "error"
    if isinstance(envelope, WarningCapture):
        return keys.warn_key(envelope.message), "warning"
    if isinstance(envelope, FixApply):
        issue = need("issueName", "fix#<issueName>#<sha8>")
        return keys.fix_key(issue, envelope.strategy, envelope.changes), "fix"
    if isinstance(envelope, FixOutcome):
        fix_id = need("fixId", "outcome#<status>#<sha8>")
        key = keys.outcome_key(
            envelope.status, fix_id, envelope.verificationMethod, envelope.durationToVerify
        )
        return key, "outcome"
    if isinstance(envelope, DocNote):
        return keys.doc_key(envelope.url), "doc"
    ts = need("ts", "run#<ISO8601>#<fp8>")
    fp = keys.fp8(
        envelope.cmd or "",
        envelope.cwd,
        envelope.exitCode,
        envelope.stdoutHead,
        envelope.stderrHead,
    )
    return keys.run_key(ts, fp), "run"
