"""An option given twice is refused, as REST refuses a query parameter given twice.

click keeps the last value of a repeated option without a word: `memsys outcome ID
--success --failure` recorded a failure, `-n a -n b` read namespace b. Which one was meant
cannot be known, so the command is refused with a usage error (exit 2). Options that take a
list (`--tag a --tag b`) and eager ones (`--help`) may repeat, and a line holding an eager
option is not refused: `--help` shows the help, as it does when an argument is missing.
"""

from __future__ import annotations

from typing import Any


def _refuse_repeats(command: Any) -> None:
    make_parser = command.make_parser

    def checked_parser(ctx: Any) -> Any:
        parser = make_parser(ctx)
        parse = parser.parse_args

        def parse_args(args: list[str]) -> Any:
            opts, rest, order = parse(args)
            if any(param.is_eager for param in order):
                return opts, rest, order  # `--help` (or --version) answers whatever else is given
            seen: set[int] = set()
            for param in order:
                once = param.param_type_name == "option" and not (
                    param.multiple or param.count or param.is_eager
                )
                if once and id(param) in seen:
                    names = " / ".join([*param.opts, *param.secondary_opts])
                    ctx.fail(f"Option {names} given more than once; give it once")
                seen.add(id(param))
            return opts, rest, order

        parser.parse_args = parse_args
        return parser

    command.make_parser = checked_parser


def refuse_repeated_options(group: Any) -> None:
    """Make every command under `group` (a built click group) refuse a repeated option."""
    for command in getattr(group, "commands", {}).values():
        if getattr(command, "_memsys_once", False):
            continue
        command._memsys_once = True
        if hasattr(command, "commands"):
            refuse_repeated_options(command)
        else:
            _refuse_repeats(command)
