"""CLI commands built from the operation table (memsys.operations).

Each input field becomes an option (`--field-name`, or the names the row gives) or, when the
row lists it in `arguments`, a positional argument; its help is the field's description and
its default the model's. Options left out are not sent, so the model's defaults apply in one
place. Values the shell can only give as text are parsed here: a dict option as JSON, an
`Any` value as JSON when it parses and as text otherwise. Every command has --json.
"""

from __future__ import annotations

import inspect
import re
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, Union, get_args, get_origin

import typer
from pydantic import BaseModel

from memsys.cli import remote
from memsys.cli.output import Json, emit, parse_json, path_given, value_of
from memsys.errors import SET_CONFIRM, InvalidInput
from memsys.operations import OPERATIONS, Cli, Operation, resolve

if TYPE_CHECKING:
    from pydantic.fields import FieldInfo

# Short forms shared by every command that has the field.
DEFAULT_FLAGS: dict[str, tuple[str, ...]] = {
    "namespace": ("--namespace", "-n"),
    "memory_type": ("--type", "-t"),
    "n_results": ("--n-results", "-k"),
}


def core_type(annotation: Any) -> Any:
    """The type under Annotated and Optional."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return core_type(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        members = [a for a in get_args(annotation) if a is not type(None)]
        return core_type(members[0]) if len(members) == 1 else Any
    return annotation


def _shell_type(tp: Any) -> tuple[Any, Callable[[Any, str], Any] | None]:
    """The type typer parses, and how to turn it into the model's value."""
    if tp in (bool, int, float):
        return tp, None
    if get_origin(tp) is list:
        (item,) = get_args(tp) or (str,)
        if isinstance(core_type(item), type) and issubclass(core_type(item), BaseModel):
            return str, lambda text, flag: parse_json(text, flag)  # a JSON array of objects
        return list[str], None
    if get_origin(tp) is dict or tp is dict:
        return str, lambda text, flag: parse_json(text, flag)
    if tp is Any:
        return str, lambda text, flag: value_of(text)
    return str, None  # str, Literal, datetime: the model parses and checks the text


class Param:
    """One CLI parameter and the input field it fills."""

    def __init__(self, cli: Cli, name: str, info: FieldInfo, parent: str | None) -> None:
        self.name, self.parent = name, parent
        self.positional = name in cli.arguments
        tp = core_type(info.annotation)
        shell, self.convert = _shell_type(tp)
        self.required = info.is_required() and parent is None
        # With --from-file the positional arguments may come from the file instead.
        required = self.required and not (self.positional and cli.from_file)
        help_text = info.description or ""
        if self.required and not required:
            help_text += " (required unless --from-file is given)"
        # The default once: S001's own words give some ("(default: 100, max: 1000)").
        if not self.required and info.default is not None and "(default" not in help_text:
            shown = str(info.default).lower() if isinstance(info.default, bool) else info.default
            help_text += f" (default {shown})"
        dash = name.replace("_", "-")
        if self.positional:
            marker: Any = typer.Argument(help=help_text, show_default=False)
        else:
            decls = cli.flags.get(name) or DEFAULT_FLAGS.get(name)
            if decls is None:
                decls = (f"--{dash}/--no-{dash}",) if tp is bool else (f"--{dash}",)
            marker = typer.Option(*decls, help=help_text, show_default=False)
            self.flag = decls[0].split("/")[0]
        self.parameter = inspect.Parameter(
            name,
            inspect.Parameter.KEYWORD_ONLY,
            annotation=Annotated[shell if required else shell | None, marker],
            default=inspect.Parameter.empty if required else None,
        )

    def value(self, given: Any) -> Any:
        if self.convert is None:
            return given
        return self.convert(given, getattr(self, "flag", self.name))


def _cli_wording(message: str, op: Operation, params: list[Param]) -> str:
    """A service's error in the CLI's words: "Set confirm=True" is "Pass --confirm", and
    "give older_than_days" is "give --older-than-days" (the argument a call names, here
    the option the user types)."""
    if SET_CONFIRM in message and "confirm" in op.cli.flags:
        message = message.replace(SET_CONFIRM, f"Pass {op.cli.flags['confirm'][0]}")
    for p in params:
        flag = getattr(p, "flag", None)
        if flag is None:
            continue
        message = re.sub(rf"\bgive {p.name}\b", f"give {flag}", message)
        # A field named in a problem ("output_format: Input should be…", "filters.doc_type:
        # …", "Invalid order_by: …"): the option. A name like order_by is never a word of
        # prose, so it is the field wherever it stands; a plain word (scope, query) only
        # where a problem starts or in a list of fields ("Give memory_id, query or …").
        nested = rf"(?:\w+\.)?{re.escape(p.name)}"
        if "_" in p.name:
            message = re.sub(rf"(?<![\w.-]){nested}\b(?!\()", flag, message)
        else:
            listed = rf"(^|; |, |Give ){nested}(?=:|,| or | must )"
            message = re.sub(listed, rf"\g<1>{flag}", message)
    return message


def parameters(op: Operation) -> list[Param]:
    cli = op.cli
    found: list[Param] = []
    for name, info in (op.input.model_fields if op.input else {}).items():
        if name in cli.hidden:
            continue
        if name == cli.flatten:
            nested = core_type(info.annotation)
            found += [Param(cli, n, i, parent=name) for n, i in nested.model_fields.items()]
        else:
            found.append(Param(cli, name, info, parent=None))
    # Positional arguments first, in the row's order.
    return sorted(found, key=lambda p: cli.arguments.index(p.name) if p.positional else 99)


FROM_FILE = inspect.Parameter(
    "from_file",
    inspect.Parameter.KEYWORD_ONLY,
    annotation=Annotated[
        str | None,
        typer.Option(
            "--from-file",
            help="A JSON-lines file of inputs, one per line (- reads stdin), instead of the "
            "arguments; the options given apply to every line that does not set them.",
            show_default=False,
            callback=path_given,
        ),
    ],
    default=None,
)


def _positionals(params: list[Param], given: dict[str, Any], from_file: str | None) -> None:
    """With --from-file no positional argument may be given; without it, every required
    one must be (typer cannot say so once they are optional)."""
    named = [p for p in params if p.positional]
    if from_file is not None:
        if any(given.get(p.name) is not None for p in named):
            raise InvalidInput(f"Give {named[0].name.upper()} or --from-file, not both")
        return
    for p in named:
        if p.required and given.get(p.name) is None:
            raise InvalidInput(f"Missing argument {p.name.upper()} (or --from-file PATH)")


def make_command(op: Operation) -> Callable[..., None]:
    params = parameters(op)
    flatten_required = bool(
        op.cli.flatten and op.input and op.input.model_fields[op.cli.flatten].is_required()
    )
    batch = resolve(op.cli.from_file) if op.cli.from_file else None

    def command(as_json: bool = False, from_file: str | None = None, **given: Any) -> None:
        if batch is not None:
            _positionals(params, given, from_file)
        data: dict[str, Any] = {}
        if flatten_required:
            data[op.cli.flatten or ""] = {}
        for p in params:
            raw = given.get(p.name)
            if raw is None or (isinstance(raw, list | tuple) and not raw and not p.positional):
                continue
            target = data if p.parent is None else data.setdefault(p.parent, {})
            target[p.name] = list(raw) if isinstance(raw, tuple) else p.value(raw)
        if batch is not None and from_file is not None:
            batch(from_file, data, as_json)
            return
        try:
            result = remote.run(op, data)  # a running server answers fastest
        except InvalidInput as exc:  # S001's wording names the argument, not the CLI's flag
            worded = _cli_wording(str(exc), op, params)
            if worded == str(exc):
                raise
            raise InvalidInput(worded) from None
        render = resolve(op.cli.render) if op.cli.render else None
        emit(result, as_json, render)

    json_param = inspect.Parameter(
        "as_json", inspect.Parameter.KEYWORD_ONLY, annotation=Json, default=False
    )
    extra = [FROM_FILE] if batch is not None else []
    signature = inspect.Signature([p.parameter for p in params] + extra + [json_param])
    command.__signature__ = signature  # type: ignore[attr-defined]
    command.__annotations__ = {n: p.annotation for n, p in signature.parameters.items()}
    command.__name__ = op.name
    command.__doc__ = op.cli.help or op.summary
    return command


def register(app: typer.Typer, groups: dict[str, typer.Typer]) -> None:
    """Add every operation's command to `app` ("pref set" goes to the `pref` group)."""
    for op in OPERATIONS:
        target, name = app, op.cli.name
        if " " in name:
            group, name = name.split(" ", 1)
            target = groups[group]
        fn = resolve(op.cli.command) if op.cli.command else make_command(op)
        target.command(name, help=op.cli.help or op.summary)(fn)
