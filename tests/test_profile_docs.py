"""Each fusion profile is described once, in ``sqlite_rrf.core.profiles.TABLE``, and the
other places are written from it:

* ``PROFILES`` (the statements' names) and the command line's ``PROFILE_SUMMARIES``
  (``--profile``'s help) are the table's;
* docs/profiles.md's table is tools/profile_docs.py's output (cog: ``make profile-docs``);
* ``sql/recall/header.sql``'s list of the profiles, and through it ``sql/recall.sql``, is
  what ``python -m sqlite_rrf.core.statements --write`` writes; that list is comments
  only, so it changes no statement.

``make lint`` (lint-docs) fails when a generated place is stale; here the same checks
run without make, and each is shown to fail on a place edited by hand.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from sqlite_rrf.cli import PROFILE_SUMMARIES, build_parser
from sqlite_rrf.core import profiles, statements
from sqlite_rrf.core.sql_files import read_sql
from sqlite_rrf.core.statements import (
    POOL_MODES,
    PROFILES,
    generated_files,
    header_with_profiles,
    main,
    profiles_comment,
    recall_statement,
    stale_files,
)

ROOT = Path(__file__).resolve().parent.parent
PROFILES_MD = ROOT / "docs" / "profiles.md"
TOOLS = ROOT / "tools"
SQL = ROOT / "sql"
BLOCK = "<!-- [[[cog import profile_docs; profile_docs.table() ]]] -->\n"
END = "<!-- [[[end]]] -->\n"

needs_checkout = pytest.mark.skipif(
    not (TOOLS / "profile_docs.py").exists() or not PROFILES_MD.exists(),
    reason="tools/ and docs/ are not shipped here",
)


@pytest.fixture(scope="module")
def profile_docs():
    sys.path.insert(0, str(TOOLS))
    try:
        import profile_docs

        yield profile_docs
    finally:
        sys.path.remove(str(TOOLS))


def generated_block(text: str) -> str:
    """The output of docs/profiles.md's cog block (what cog wrote below it)."""
    assert text.count(BLOCK) == 1, "docs/profiles.md has lost its generated table"
    return text.split(BLOCK, 1)[1].split(END, 1)[0]


def test_the_names_and_the_help_are_the_tables():
    assert PROFILES == profiles.NAMES == tuple(p.name for p in profiles.TABLE)
    assert PROFILE_SUMMARIES == {p.name: p.summary for p in profiles.TABLE}
    sub = next(a for a in build_parser()._actions if hasattr(a, "choices") and a.choices)
    (option,) = [a for a in sub.choices["recall"]._actions if "--profile" in a.option_strings]
    assert tuple(option.choices) == PROFILES
    for p in profiles.TABLE:
        assert f"{p.name}: {p.summary}" in option.help


def test_every_profile_has_its_fragment_and_every_fragment_its_row():
    fragments = {f.stem[len("profile_") :] for f in (SQL / "recall").glob("profile_*.sql")}
    assert fragments == set(PROFILES)
    for p in profiles.TABLE:
        assert re.fullmatch(r"[a-z]+", p.name), p.name
        assert p.summary and "\n" not in p.summary and "docs/" not in p.summary, p.name
        assert p.score and p.source, p.name
        assert p.k_use is None or isinstance(p.k_use, str), p.name


@needs_checkout
def test_the_docs_table_is_what_the_generator_gives_now(profile_docs):
    """What `make lint` (cog --check) checks, without cog: run `make profile-docs` when
    this fails."""
    want = profile_docs.profiles_table()
    assert generated_block(PROFILES_MD.read_text(encoding="utf-8")) == want
    default = statements.recall_defaults()["profile"]
    rows = [line for line in want.splitlines() if line.startswith("| `")]
    assert [re.match(r"\| `(\w+)`", r).group(1) for r in rows] == list(PROFILES)
    for row, p in zip(rows, profiles.TABLE):
        cells = [c.strip() for c in row.strip("|").split(" | ")]
        assert cells[1:3] == [p.summary, p.score]
        assert ("(default)" in cells[0]) == (p.name == default)
        k = statements.recall_defaults(p.name)["k"]
        assert cells[3] == ("–" if p.k_use is None else f"{k:g}" + (p.k_use and f" ({p.k_use})"))


@needs_checkout
def test_a_hand_edit_of_the_docs_table_is_seen(profile_docs, tmp_path):
    text = PROFILES_MD.read_text(encoding="utf-8")
    block = generated_block(text)
    edited = text.replace(block, block.replace("near-ties", "near ties", 1))
    assert edited != text
    assert generated_block(edited) != profile_docs.profiles_table()
    # and cog --check, what make lint runs, refuses it (and passes the page as it is)
    pytest.importorskip("cogapp", reason="cogapp comes with the lint extra")
    for page, ok in ((text, True), (edited, False)):
        path = tmp_path / "profiles.md"
        path.write_text(page, encoding="utf-8")
        run = subprocess.run(
            [sys.executable, "-m", "cogapp", "--check", "-I", str(TOOLS), str(path)],
            capture_output=True,
            text=True,
        )
        assert (run.returncode == 0) == ok, run.stdout + run.stderr


@needs_checkout
def test_a_change_to_the_table_changes_every_generated_place(profile_docs, monkeypatch):
    before_docs = profile_docs.profiles_table()
    before_sql = profiles_comment()
    changed = profiles.TABLE[1]._replace(summary="a summary written only by this test")
    monkeypatch.setattr(profiles, "TABLE", (profiles.TABLE[0], changed, *profiles.TABLE[2:]))
    monkeypatch.setattr(profile_docs, "TABLE", profiles.TABLE)
    assert profile_docs.profiles_table() != before_docs
    assert "a summary written only by this test" in profile_docs.profiles_table()
    assert profiles_comment() != before_sql
    assert "a summary written only by this test" in profiles_comment()
    assert stale_files() == ["recall/header.sql", "recall.sql"]


def test_the_sql_files_are_current():
    """What `make lint` (statements --check) checks: run `make profile-docs` (or
    python -m sqlite_rrf.core.statements --write) when this fails."""
    assert stale_files() == []
    assert main(["--check"]) == 0
    header = read_sql("recall/header.sql")
    assert profiles_comment() in header
    assert recall_statement().startswith(header)
    for p in profiles.TABLE:
        assert f"'{p.name}'" in header
        lines = [line[2:].strip() for line in profiles_comment().splitlines()]
        assert p.summary in " ".join(lines)


def test_a_hand_edit_of_the_header_is_seen(monkeypatch, capsys):
    header = read_sql("recall/header.sql")
    edited = header.replace("near-ties", "near ties", 1)
    assert edited != header
    assert header_with_profiles(edited) == header  # --write puts the table's words back
    real = statements.read_sql
    monkeypatch.setattr(
        statements, "read_sql", lambda name: edited if name == "recall/header.sql" else real(name)
    )
    assert stale_files() == ["recall/header.sql"]
    assert main(["--check"]) == 1
    assert "sql/recall/header.sql is stale" in capsys.readouterr().err
    assert generated_files()["recall/header.sql"] == header


def test_the_header_must_have_a_place_for_the_list():
    header = read_sql("recall/header.sql")
    with pytest.raises(ValueError, match="the list of the profiles goes after exactly one"):
        header_with_profiles(header.replace("--   The profiles (", "--   Profiles ("))


def test_the_list_of_the_profiles_is_comments_only():
    """The generated lines are SQL comments within the header's width, so that the table's
    words never change a statement: every pool's and profile's statement is its SQL with
    any header at all."""
    header = read_sql("recall/header.sql")
    for line in header.splitlines():
        assert line.startswith("--") or not line.strip(), line
    for line in profiles_comment().splitlines():
        assert line.startswith("-- ") and len(line) <= 90, line
    for pool in POOL_MODES:
        for prof in PROFILES:
            stmt = recall_statement(pool, prof)
            assert stmt.startswith(header)
            assert statements._compose(pool, prof, "-- another header\n") == (
                "-- another header\n" + stmt[len(header) :]
            )


@needs_checkout
def test_make_lint_checks_the_generated_places():
    lint = (ROOT / "mk" / "lint.mk").read_text(encoding="utf-8")
    target = lint.split("\nlint-docs:", 1)[1].split("\n\n", 1)[0]
    assert "--check -I tools $(PROFILE_DOCS)" in target
    assert "-m sqlite_rrf.core.statements --check" in target
    assert re.search(r"^PROFILE_DOCS\s*:=\s*docs/profiles.md$", lint, re.M)
    assert re.search(r"^lint: [^\n]*\blint-docs\b", lint, re.M)
