"""docs/cli.md's tables of commands and options are generated from the parser.

tools/cli_docs.py writes them (cog runs it: ``make cli-docs``; ``make lint`` fails when they
are stale). Here: every command and every option of ``cli.build_parser()`` is in the
generated tables, each block of docs/cli.md is what the generator gives now, and a change
to the parser shows in the output.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import List, Tuple

import pytest

from sqlite_rrf import cli

ROOT = Path(__file__).resolve().parent.parent
CLI_MD = ROOT / "docs" / "cli.md"
TOOLS = ROOT / "tools"

pytestmark = pytest.mark.skipif(
    not (TOOLS / "cli_docs.py").exists() or not CLI_MD.exists(),
    reason="tools/ and docs/ are not shipped here",
)


@pytest.fixture(scope="module")
def cli_docs():
    sys.path.insert(0, str(TOOLS))
    try:
        import cli_docs

        yield cli_docs
    finally:
        sys.path.remove(str(TOOLS))


_BLOCK = re.compile(r"<!-- \[\[\[cog (.*?) \]\]\] -->\n(.*?)<!-- \[\[\[end\]\]\] -->", re.S)


def blocks(text: str) -> List[Tuple[str, str]]:
    """(the cog code, the output below it) of each block of ``text``."""
    return [(m.group(1), m.group(2)) for m in _BLOCK.finditer(text)]


def test_every_command_and_option_is_in_the_generated_tables(cli_docs):
    parser = cli.build_parser()
    text = CLI_MD.read_text(encoding="utf-8")
    commands = cli_docs.commands_table(text, parser)
    for name, sub in cli_docs.subparsers(parser).items():
        assert f"`{name}`" in commands, name
        table = cli_docs.options_table(name, parser)
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            for opt in action.option_strings:
                assert f"`{opt}" in table, (name, opt)


def test_the_page_is_what_the_generator_gives_now(cli_docs):
    """What `make lint` (cog --check) checks, without cog: run `make cli-docs` when this
    fails."""
    text = CLI_MD.read_text(encoding="utf-8")
    found = blocks(text)
    assert len(found) >= 20, "docs/cli.md has lost its generated blocks"
    parser = cli.build_parser()
    stale = []
    for code, output in found:
        m = re.fullmatch(r'import cli_docs; cli_docs\.(commands|options)\((?:"(\w+)")?\)', code)
        assert m, f"an unknown cog block: {code}"
        want = (
            cli_docs.commands_table(text, parser)
            if m.group(1) == "commands"
            else cli_docs.options_table(m.group(2), parser)
        )
        if output != want:
            stale.append(code)
    assert stale == [], "docs/cli.md is stale: run `make cli-docs`"
    documented = {m.group(1) for m in re.finditer(r'cli_docs\.options\("(\w+)"\)', text)}
    missing = set(cli_docs.subparsers(parser)) - documented - {"path"}
    assert missing == set(), f"commands without a generated table: {sorted(missing)}"


def test_a_change_to_the_parser_changes_the_tables(cli_docs):
    parser = cli.build_parser()
    before = cli_docs.options_table("stats", parser)
    sub = cli_docs.subparsers(parser)["stats"]
    sub.add_argument("--frobnicate", metavar="N", default=7, help="frobnicate | N times")
    after = cli_docs.options_table("stats", parser)
    assert after != before
    assert "| `--frobnicate N` | frobnicate \\| N times (default 7) |" in after
    text = CLI_MD.read_text(encoding="utf-8")
    assert "`--frobnicate" not in text
    assert cli_docs.slug("`sqlite-rrf eval DATA_DIR`") == "sqlite-rrf-eval-data_dir"
    assert cli_docs.section_anchors("## `sqlite-rrf get DB ID`\n")["get"] == "sqlite-rrf-get-db-id"
