"""S000's stable keys, its envelope gates and the relation registry (no database needed)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memsys import keys, relations
from memsys.schemas.observations import parse_envelope, stable_key


def test_normalized_key_follows_s000_order() -> None:
    message = "Cannot find module 'Foo' (commit 3f2a9c1d) in lodash 4.17.21   at  line"
    assert (
        keys.normalized_key(message) == "cannot find module 'foo' (commit ) in lodash x.y.z at line"
    )
    # versions and hashes that differ give one key: the same error across upgrades
    other = "Cannot find module 'Foo' (commit 9b8e7d6c5a) in lodash v5.0.0-beta.1 at line"
    assert keys.err_key(message) == keys.err_key(other)
    # words made of hex letters only are kept ("defaced" is not a hash)
    assert keys.normalized_key("Defaced ADDED") == "defaced added"


def test_keys_are_deterministic_and_shaped_as_s000_says() -> None:
    fp = keys.fp8("npm  test", "/app", 1, "out", "err")
    assert fp == keys.fp8("npm  test", "/app", 1, "out", "err") and len(fp) == 8
    assert keys.cmd_key("npm   test\n--watch", fp) == f"cmd#npm test --watch#{fp}"
    assert keys.cmd_key("x " * 200, fp).startswith("cmd#" + ("x " * 60).strip()[:120])
    ts = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)
    assert keys.run_key(ts, fp) == f"run#2026-11-23T10:00:00.000Z#{fp}"
    assert keys.dep_key("lodash", "4.17.21") == "dep#lodash@4.17.21"
    assert keys.dep_key("lodash") == "dep#lodash"
    url = "https://nodejs.org/api/esm.html"
    assert keys.doc_key(url) == "doc#" + keys.sha(url) and len(keys.doc_key(url)) == 68
    a = keys.fix_key("err#x", "pin", ["package.json"])
    assert a == keys.fix_key("err#x", "pin", ["package.json"]) != keys.fix_key("err#x", "pin", [])
    assert keys.concept_key("TS-Node Loader") == "concept#ts-node-loader"
    for good in (
        keys.run_key(ts, fp),
        a,
        keys.doc_key(url),
        "mode#code@2",
        "tool#npm@10",
        "file#src/app.ts",
        "concept#esm",
        "dep#lodash@4.17.21",
    ):
        assert keys.check(good) is not None, good
    assert keys.check("Alice") is None and keys.check("note#1") is None


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("run#yesterday#abcdef12", "ISO 8601"),
        ("err#Cannot Find", "not normalised"),
        ("doc#https://x", "doc#<sha256(url)>"),
        ("outcome#great#abcdef12", "outcome#<"),
        ("concept#Two Words", "concept#<slug>"),
        ("cmd#npm  test#abcdef12", "collapsed"),
    ],
)
def test_malformed_keys_are_refused_with_the_expected_shape(name: str, why: str) -> None:
    with pytest.raises(ValueError, match="Malformed") as raised:
        keys.check(name)
    assert why in str(raised.value)


def test_envelopes_are_validated_field_by_field() -> None:
    ok = parse_envelope({"type": "command.exec", "cmd": "npm test", "exitCode": 1})
    assert stable_key(ok)[1] == "command"
    bad = [
        ({"type": "command.run", "cmd": "x"}, "observation.type: 'command.run' is not an S000"),
        ({"cmd": "x"}, "observation.type: missing"),
        ({"type": "command.exec", "cmd": "x"}, "observation.exitCode: Field required"),
        ({"type": "command.exec", "cmd": "x", "exitCode": 0, "exitcode": 0}, "exitcode"),
        ({"type": "fix.apply", "strategy": "pin", "changes": [], "result": "applied"}, "changes"),
        (
            {
                "type": "fix.outcome",
                "status": "fine",
                "verificationMethod": "ci",
                "durationToVerify": 3,
            },
            "observation.status",
        ),
        ({"type": "doc.note", "url": "ftp://x", "accessed_at": "2026-11-01"}, "observation.url"),
        (
            {"type": "command.exec", "cmd": "x", "exitCode": 0, "stdoutHead": "y" * 5000},
            "observation.stdoutHead",
        ),
        (
            {
                "type": "error.capture",
                "kind": "E",
                "message": "Boom 1.2.3",
                "detector": "d",
                "normalizedKey": "boom 1.2.3",
            },
            "observation.normalizedKey",
        ),
    ]
    for data, message in bad:
        with pytest.raises(ValueError) as raised:
            parse_envelope(data)
        assert message in str(raised.value), (data, str(raised.value))
    with pytest.raises(ValueError, match="not valid JSON"):
        parse_envelope('{"type": ')
    no_issue = parse_envelope(
        {"type": "fix.apply", "strategy": "pin", "changes": ["a"], "result": "applied"}
    )
    with pytest.raises(ValueError, match="issueName: needed for the stable key"):
        stable_key(no_issue)


def test_one_registry_for_every_seed_vocabulary() -> None:
    assert relations.require("CAUSED_BY") == relations.require("caused_by") == "caused_by"
    assert relations.require("has-outcome") == "has_outcome"
    for name in (
        "relates_to",
        "supersedes",
        "contradicts",
        "solves",
        "builds_on",
        "depends_on",
        "part_of",
        "similar_to",
        "executes",
        "touches",
    ):
        assert name in relations.PUBLIC
    with pytest.raises(ValueError, match="Unknown relation type: likes"):
        relations.require("likes")
    with pytest.raises(ValueError, match="Unknown relation type"):
        relations.require("mentions")  # memsys's own
    relations.check_pair("caused_by", "error", "dependency")
    with pytest.raises(ValueError, match="not in the S000 vocabulary"):
        relations.check_pair("caused_by", "dependency", "error")
    assert "| `resolves` |" in relations.markdown_table()
