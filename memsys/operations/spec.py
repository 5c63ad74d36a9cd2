"""The shape of a row of the operation table, and how a row names code ("module:function")."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from memsys import schemas as s

Effect = Literal["read", "write", "idempotent", "destructive"]


@dataclass(frozen=True)
class Rest:
    """One REST route of an operation. Path parameters come from `{name}` in `path`; the
    other fields go in the query string for GET and DELETE and in the JSON body otherwise,
    except those listed in `query`. `fields` limits a route to some of the input's fields
    (e.g. DELETE /memories/{memory_id} offers force and purge only)."""

    method: Literal["GET", "POST", "PUT", "DELETE"]
    path: str
    status: int = 200
    query: tuple[str, ...] = ()
    fields: tuple[str, ...] | None = None
    summary: str | None = None


@dataclass(frozen=True)
class Cli:
    """The CLI command. Fields become `--field-name` options unless listed in `arguments`
    (positional, in order) or renamed in `flags`; `flatten` spreads a nested model's fields
    (the search filters) as options of their own. `render` ("module:function") prints the
    human form; --json always prints the output model. `command` ("module:function")
    replaces the generated command where the CLI truly differs (progress bars). `from_file`
    ("module:function", called with the path, the options given and --json) adds
    `--from-file PATH`, which stands in for the positional arguments: the command then reads
    many inputs from a file, the options given applying to each that does not set them."""

    name: str
    arguments: tuple[str, ...] = ()
    flags: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    flatten: str | None = None
    hidden: tuple[str, ...] = ()
    render: str | None = None
    command: str | None = None
    from_file: str | None = None
    help: str | None = None


@dataclass(frozen=True)
class Operation:
    name: str
    summary: str
    service: str
    input: type[s.Input] | None
    output: type[s.Output]
    effect: Effect
    rest: tuple[Rest, ...]
    cli: Cli
    mcp_hidden: tuple[str, ...] = ()  # fields S001's tool does not publish
    mcp_required: tuple[str, ...] = ()  # optional in the model, required by S001
    after: str | None = None  # "module:function" run with (params, result) after success
    # False: MCP answers with the output itself, not S001's envelope (the drop-in for the
    # official memory server, whose clients expect its shapes).
    mcp_envelope: bool = True

    @property
    def read_only(self) -> bool:
        return self.effect == "read"

    @property
    def destructive(self) -> bool:
        return self.effect == "destructive"

    @property
    def idempotent(self) -> bool:
        return self.effect == "idempotent"

    def run(self, data: dict[str, Any]) -> s.Output:
        """Validate `data` against the input model, then run the service in one transaction."""
        from memsys import runner

        if self.input is None:
            if data:
                raise_unknown(sorted(data))
            return runner.execute_bare(resolve(self.service))  # type: ignore[no-any-return]
        params = s.parse(self.input, data)
        return self.run_parsed(params)

    def run_parsed(self, params: s.Input) -> s.Output:
        from memsys import runner

        result: s.Output = runner.run(resolve(self.service), params)
        if self.after is not None:
            resolve(self.after)(params, result)
        return result


def raise_unknown(names: list[str]) -> None:
    from memsys.errors import InvalidInput

    raise InvalidInput(f"Unknown argument(s): {', '.join(names)} (this operation takes none)")


def resolve(ref: str) -> Callable[..., Any]:
    """ "memsys.services.memories:store" (or "memories:store" for a service) → the function."""
    module, _, name = ref.partition(":")
    if "." not in module:
        module = f"memsys.services.{module}"
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


def wake_worker(
    params: s.IndexDirectoryIn | s.IndexFileIn, result: s.IndexDirectoryOut | s.IndexFileOut
) -> None:
    """index_directory with async_mode, index_file of a long file: the running server's
    worker embeds the queue now."""
    if result.pending_embeddings:
        from memsys.background import worker

        worker().wake()
