"""The rows of memory as code (memsys.vault): export, import and diff of snapshots.

Their CLI commands are written by hand (memsys.cli.vault: stdout and stdin, a vault folder,
exit codes for CI), and so are the streaming REST routes GET /v1/export and POST
/v1/import, whose body is the export itself (memsys.api.vault). The rows' own routes take a
path on the memsys host, as the MCP tools do: POST /v1/export/file, POST /v1/import/file,
GET /v1/diff.
"""

from __future__ import annotations

from memsys.operations.spec import Cli, Operation, Rest
from memsys.schemas import vault as v

SERVICE = "memsys.vault.service"
VAULT_CLI = "memsys.cli.vault"

VAULT_OPERATIONS: tuple[Operation, ...] = (
    Operation(
        name="memory_export",
        summary="Export memories, edges and preferences to a file on the memsys host: a JSON "
        "document, JSON lines, or a markdown vault folder (one file per memory, for git and "
        "Obsidian). The same database always gives the same memory, edge and preference files "
        "(a vault's CORE.md and REFLECTION.md carry the day's date).",
        service=f"{SERVICE}:export",
        input=v.ExportIn,
        output=v.ExportOut,
        effect="idempotent",
        rest=(Rest("POST", "/export/file"),),
        cli=Cli("export", command=f"{VAULT_CLI}:export_command"),
    ),
    Operation(
        name="memory_import",
        summary="Import a memsys export (JSON, JSON lines or a vault folder). A dry run "
        "checks every record and says what would change, writing nothing: the default for "
        "this tool (MCP, POST /v1/import/file), while `memsys import` and POST /v1/import "
        "write unless asked for one. Edited memories become new versions; a snapshot with "
        "problems is refused (each with its file and line, the first five in the error) and "
        "nothing is written, unless partial is true.",
        service=f"{SERVICE}:import_checked",
        input=v.ImportIn,
        output=v.ImportOut,
        effect="write",
        rest=(Rest("POST", "/import/file"),),
        cli=Cli("import", command=f"{VAULT_CLI}:import_command"),
    ),
    Operation(
        name="memory_diff",
        summary="Compare two snapshots, or a snapshot with the live database: records added, "
        "removed, and changed field by field.",
        service=f"{SERVICE}:diff",
        input=v.DiffIn,
        output=v.DiffOut,
        effect="read",
        rest=(Rest("GET", "/diff"),),
        cli=Cli("diff", command=f"{VAULT_CLI}:diff_command"),
    ),
)
