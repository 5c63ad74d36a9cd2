"""Memory as code: a database snapshot as files (JSON, JSON lines, the S003 markdown vault),
read back with validation, compared (diff), checked against memory-schema.yaml (lint),
upgraded across schema versions, and measured by S004's eval suites (`evals`).

Layering: `records` is the format (plain dicts, no I/O); `markdown` and `files` read and
write it; `live` reads it from the database; `export`, `importer` (+ `apply`), `diff`,
`lint` (+ `fixer`) and `upgrade` are the verbs; `service` is what the front ends call.
"""
