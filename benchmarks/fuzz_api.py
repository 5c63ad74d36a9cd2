"""The REST contract under a long fuzz: schemathesis generates requests from the OpenAPI
document (valid per the schema, and ones that break it) for every route and runs all its
checks on every answer, against a real HTTP server (uvicorn, keep-alive connections) on a
private embedded PostgreSQL. Prints the requests sent, the status codes, the server errors
and every distinct contract failure (check, route, one reproduction).

    .venv/bin/python benchmarks/fuzz_api.py [--cases 80] [--scope 'project:*'] [--only /v1/...]

`--cases` is per route and mode (valid, invalid): 73 routes x 2 x 80 ≈ 11,000 requests
(routes with little to vary send fewer). `--scope` runs as a read-write token scoped to
those namespaces (every route through row-level security) instead of the admin token.
Rules JSON Schema cannot state (tests/api/fuzz/hooks.py) are not counted as failures.
The bounded version of this run is tests/api/test_contract.py.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import socket
import sys
import threading
import time
from collections import Counter
from typing import Any

import common

sys.path.insert(0, str(common.ROOT))  # tests.api.fuzz.hooks: the rules the schema cannot state


def serve(port: int) -> Any:
    import uvicorn

    from memsys.api.app import create_app

    server = uvicorn.Server(
        uvicorn.Config(create_app(), host="127.0.0.1", port=port, log_level="critical")
    )
    threading.Thread(target=server.run, daemon=True).start()
    deadline = time.monotonic() + 60
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    return server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scoped_secret(patterns: str) -> str:
    from memsys import runner
    from memsys.schemas.tokens import TokenCreateIn
    from memsys.services import tokens

    made = runner.execute(
        tokens.create,
        TokenCreateIn,
        {"name": "fuzz", "namespaces": patterns.split(","), "mode": "read-write"},
    )
    return str(made.secret)


class Tally:
    def __init__(self) -> None:
        self.sent = 0
        self.statuses: Counter[int] = Counter()
        self.failures: Counter[tuple[str, str, str]] = Counter()
        self.examples: dict[tuple[str, str, str], str] = {}
        self.errors: Counter[str] = Counter()  # the client could not get an answer at all

    def failure(self, label: str, failure: Any, case: Any, response: Any) -> None:
        key = (label, failure.code, failure.title)
        self.failures[key] += 1
        if key not in self.examples:
            message = " ".join(str(failure.message).split())[:300]
            answer = response.text[:300]
            self.examples[key] = (
                f"[{response.status_code}] {message}\n      answer: {answer}"
                f"\n      {case.as_curl_command()[:600]}"
            )


def fuzz(operation: Any, mode: Any, cases: int, headers: dict[str, str], tally: Tally) -> None:
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis.errors import Unsatisfiable
    from schemathesis.checks import CHECKS
    from schemathesis.core.failures import Failure, FailureGroup

    checks = CHECKS.get_all()

    @settings(
        max_examples=cases,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],  # no shrinking: every case is a new request
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def run(case: Any) -> None:
        tally.sent += 1
        try:
            response = case.call(headers=headers, timeout=60)
        except Exception as exc:  # a reset connection, a timeout: the server did not answer
            tally.errors[f"{operation.label}: {type(exc).__name__}"] += 1
            return
        tally.statuses[response.status_code] += 1
        try:
            case.validate_response(response, checks=checks, headers=headers)
        except FailureGroup as group:
            for failure in group.exceptions:
                tally.failure(operation.label, failure, case, response)
        except Failure as failure:
            tally.failure(operation.label, failure, case, response)

    with contextlib.suppress(Unsatisfiable):  # nothing to break in this mode (no parameters)
        run()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=80, help="per route and mode")
    parser.add_argument("--scope", help="namespace patterns of a scoped read-write token")
    parser.add_argument("--only", help="only routes whose path starts with this")
    args = parser.parse_args()
    home = common.private_home("msz-")
    root = home / "index-root"  # the one folder the fuzzer may index
    root.mkdir()
    (root / "a.md").write_text("# A\n\nA small file the fuzzer may index.\n")
    os.environ["MEMSYS_INDEX_ROOTS"] = str(root)
    admin = secrets.token_urlsafe(24)
    os.environ["MEMSYS_API_TOKEN"] = admin
    try:
        settings = common.start_database()
        import schemathesis
        from schemathesis import GenerationMode
        from schemathesis.checks import load_all_checks

        import tests.api.fuzz.hooks  # noqa: F401  (registers filter_failure)

        load_all_checks()
        secret = scoped_secret(args.scope) if args.scope else admin
        headers = {"Authorization": f"Bearer {secret}"}
        port = free_port()
        server = serve(port)
        schema = schemathesis.openapi.from_url(
            f"http://127.0.0.1:{port}/openapi.json", headers=headers
        )
        operations = [r.ok() for r in schema.get_all_operations()]
        if args.only:
            operations = [op for op in operations if op.path.startswith(args.only)]
        tally = Tally()
        start = time.perf_counter()
        for n, operation in enumerate(operations, 1):
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                fuzz(operation, mode, args.cases, headers, tally)
            common.progress(f"{n}/{len(operations)} {operation.label}: {tally.sent} sent")
        seconds = time.perf_counter() - start
        server.should_exit = True
        report(args, tally, len(operations), seconds, settings)
    finally:
        common.stop_database(home, keep=False)


def report(args: Any, tally: Tally, routes: int, seconds: float, settings: Any) -> None:
    server_errors = sum(n for code, n in tally.statuses.items() if code >= 500)
    print(f"routes: {routes}; requests sent: {tally.sent} in {seconds:.0f} s")
    print("as:", f"scoped token {args.scope!r}" if args.scope else "admin token")
    print("statuses:", dict(sorted(tally.statuses.items())))
    print(f"server errors (5xx): {server_errors}; no answer: {sum(tally.errors.values())}")
    for what, n in tally.errors.most_common():
        print(f"  no answer x{n}: {what}")
    print(f"contract failures: {sum(tally.failures.values())} in {len(tally.failures)} kinds")
    for (label, code, title), n in sorted(tally.failures.items()):
        print(f"  {code} {title} x{n}: {label}\n      {tally.examples[(label, code, title)]}")
    payload = {
        "machine": common.machine(),
        "load": common.loadavg(),
        "server": settings,
        "scope": args.scope,
        "cases_per_route_and_mode": args.cases,
        "routes": routes,
        "sent": tally.sent,
        "seconds": round(seconds, 1),
        "statuses": {str(k): v for k, v in sorted(tally.statuses.items())},
        "server_errors": server_errors,
        "no_answer": dict(tally.errors),
        "failures": [
            {"route": label, "check": code, "title": title, "count": n}
            for (label, code, title), n in sorted(tally.failures.items())
        ],
    }
    name = "fuzz_api_scoped.json" if args.scope else "fuzz_api.json"
    print("written to", common.write_json(name, payload))


if __name__ == "__main__":
    main()
