"""docs/cli.md's generated parts, written from the command line's own parser.

docs/cli.md holds `cog <https://pypi.org/project/cogapp/>`_ blocks, each an HTML comment
that calls a function of this module::

    <!-- [[[cog import cli_docs; cli_docs.commands() ]]] -->
    <!-- [[[cog import cli_docs; cli_docs.options("recall") ]]] -->

and cog writes each one's output below it, up to ``<!-- [[[end]]] -->``. ``make cli-docs``
regenerates them (``cog -r -I tools docs/cli.md``); ``make lint`` fails when they differ
from what the parser (``sqlite_rrf.cli.build_parser()``) gives (``cog --check``). The
words are the parser's: an option's help is changed in the parser, never here.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Dict, List, Optional

from sqlite_rrf.cli import build_parser

try:  # inside cog, output goes to the block; outside (tests, a shell), it is printed
    import cog
except ImportError:  # pragma: no cover
    cog = None


def _out(text: str) -> None:
    if cog is not None and getattr(cog, "inFile", None):
        cog.out(text)
    else:
        print(text, end="")


def subparsers(
    parser: Optional[argparse.ArgumentParser] = None,
) -> Dict[str, argparse.ArgumentParser]:
    """Every command's name (aliases included) and its parser."""
    parser = parser or build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _cell(text: str) -> str:
    """``text`` as one Markdown table cell: one line, ``|`` escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def _usage(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """How an argument is written, as ``--help`` writes it: ``--pool {recent,all}``,
    ``-o FILE``, ``DB``."""
    formatter = parser._get_formatter()
    if not action.option_strings:
        return formatter._format_args(action, formatter._get_default_metavar_for_positional(action))
    if action.nargs == 0:
        return ", ".join(f"`{s}`" for s in action.option_strings)
    args = formatter._format_args(action, formatter._get_default_metavar_for_optional(action))
    return ", ".join(f"`{s} {args}`" for s in action.option_strings)


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The argument's help as ``--help`` expands it, with its default when the help does
    not say it."""
    text = parser._get_formatter()._expand_help(action) if action.help else ""
    default = action.default
    if (
        action.nargs != 0
        and default not in (None, "", argparse.SUPPRESS)
        and "default" not in text.lower()
    ):
        text = f"{text} (default {default})" if text else f"default {default}"
    return text


def option_rows(command: str, parser: Optional[argparse.ArgumentParser] = None) -> List[List[str]]:
    """[argument, meaning] for each argument of ``command``: the positional ones first,
    then the options, in the parser's order; ``--help`` left out."""
    sub = subparsers(parser)[command]
    rows = []
    actions = [a for a in sub._actions if not isinstance(a, argparse._HelpAction)]
    actions = [a for a in actions if a.help != argparse.SUPPRESS]
    for action in sorted(actions, key=lambda a: bool(a.option_strings)):
        usage = _usage(sub, action)
        if not action.option_strings:
            usage = f"`{usage}`"
        rows.append([usage, _help(sub, action)])
    return rows


def options_table(command: str, parser: Optional[argparse.ArgumentParser] = None) -> str:
    """The Markdown table of ``command``'s arguments."""
    rows = option_rows(command, parser)
    if not rows:
        return "No arguments, no options.\n"
    lines = ["| argument | meaning |", "| --- | --- |"]
    lines += [f"| {_cell(a)} | {_cell(b)} |" for a, b in rows]
    return "\n".join(lines) + "\n"


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def section_anchors(markdown: str) -> Dict[str, str]:
    """Each command's anchor: the first heading ``## `sqlite-rrf NAME …``` of the page."""
    out: Dict[str, str] = {}
    for m in re.finditer(r"^#{2,3} (`sqlite-rrf (\w+)[^\n]*)$", markdown, re.M):
        out.setdefault(m.group(2), slug(m.group(1)))
    return out


def commands_table(markdown: str = "", parser: Optional[argparse.ArgumentParser] = None) -> str:
    """The Markdown table of every command, its aliases and its help, each linked to its
    section of ``markdown`` (when it has one)."""
    parser = parser or build_parser()
    anchors = section_anchors(markdown)
    by_parser: Dict[int, List[str]] = {}
    for name, sub in subparsers(parser).items():
        by_parser.setdefault(id(sub), []).append(name)
    helps = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
    lines = ["| command | does |", "| --- | --- |"]
    for names in by_parser.values():
        name, aliases = names[0], names[1:]
        cell = f"[`{name}`](#{anchors[name]})" if name in anchors else f"`{name}`"
        if aliases:
            cell += " (" + ", ".join(f"`{a}`" for a in aliases) + ")"
        lines.append(f"| {cell} | {_cell(helps.get(name, ''))} |")
    return "\n".join(lines) + "\n"


# ---- what the cog blocks of docs/cli.md call ----


def options(command: str) -> None:
    """Write ``command``'s table of arguments into the cog block."""
    _out(options_table(command))


def commands() -> None:
    """Write the table of commands into the cog block, linked to the page's sections."""
    page = Path(cog.inFile) if cog is not None and getattr(cog, "inFile", None) else None
    _out(commands_table(page.read_text(encoding="utf-8") if page else ""))
