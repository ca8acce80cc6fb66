"""The documentation kept in step with the code (docs/ and README.md).

* Every SQL function the extension registers (``pragma_function_list`` after loading,
  minus a fresh connection's) has a page ``docs/sql/<name>.md`` whose title names it
  with a signature of exactly the registered arities; the page of a window function
  says so. Every error message of ``csrc/*.c`` is on its function's page.
* Every ``sqlite-rrf`` command (``cli.build_parser()``'s subparsers) has a section in
  ``docs/cli.md`` naming each of its options.
* Every public name of ``sqlite_rrf.__all__``, every public member of ``Store`` and the
  rest of the Python API listed below appear in ``docs/python.md``.
* Every ```` ```sql ```` block in ``docs/**/*.md`` and ``README.md`` runs in a fresh
  in-memory apsw connection with the extension loaded, and its ``-- → value`` comments
  are checked. ```` ```sql fragment ```` blocks (quotes of the shipped statements) must
  be verbatim in ``sql/``, and docs/recall.md quotes every CTE of ``sql/recall.sql``.
  On every page but profiles.md, evaluation.md and datasette.md (written and tested
  elsewhere), ```` ```python ```` blocks run and ```` ```console ```` sessions are
  replayed. README.md's console sessions are replayed by tests/test_readme_shell.py, as
  a pip user runs them (outside the checkout, the installed ``sqlite-rrf``).

The conventions for examples are written down for authors in docs/index.md
("Conventions for examples"); in short, a ```` ```sql ```` block may start with

    -- needs: memory-db      the episodes database of docs/recall.md (a copy per block)
    -- needs: previous       the connection of the page's previous sql block
    -- needs: sqlite-vec     sqlite-vec loaded too (skipped when it is not installed)
    -- params: {"query": "postgres"}   named parameters (unbound ones are NULL)

and ``-- → value`` after a statement is its result as the sqlite3 shell prints it in list
mode (columns joined by ``|``; one ``-- →`` line per row; ``NULL`` for NULL; a value
ending in ``...`` is a prefix), ``-- → (no rows)``, or ``-- → error: message``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import inspect
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

import apsw
import pytest

import sqlite_rrf
from sqlite_rrf import cli, store as store_mod
from sqlite_rrf.core import kernels, migrations
from sqlite_rrf.embedding.embedder import Embedder
from sqlite_rrf.store import Episode, RecallHit, RecallResult, Store

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
SQL_DIR = ROOT / "sql"
CSRC = ROOT / "csrc"
# Pages written by others: their sql blocks run (as every page's), but their python
# blocks and console sessions are not replayed here.
OTHERS_PAGES = ("profiles.md", "evaluation.md", "datasette.md")

needs_docs = pytest.mark.skipif(not DOCS.is_dir(), reason="docs/ is not shipped here")


# ---------------------------------------------------------------------------------------
# Markdown code blocks
# ---------------------------------------------------------------------------------------


@dataclasses.dataclass
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    info: str  # the fence's info string, e.g. "sql" or "sql fragment"
    body: str

    @property
    def lang(self) -> str:
        return self.info.split()[0] if self.info.split() else ""

    @property
    def attrs(self) -> List[str]:
        return self.info.split()[1:]

    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


_FENCE = re.compile(r"^([ \t]*)(`{3,}|~{3,})[ \t]*([^`\n]*)$")


def code_blocks(path: Path) -> List[Block]:
    """The fenced code blocks of a Markdown file, dedented by their fence's indent."""
    blocks: List[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = m.group(1), m.group(2), m.group(3).strip()
        body: List[str] = []
        j = i + 1
        while j < len(lines) and not (
            lines[j].strip().startswith(fence[0] * len(fence))
            and lines[j].strip().strip(fence[0]) == ""
        ):
            body.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j])
            j += 1
        blocks.append(Block(path, i + 1, info, "\n".join(body) + "\n"))
        i = j + 1
    return blocks


def doc_pages() -> List[Path]:
    return sorted(DOCS.rglob("*.md")) if DOCS.is_dir() else []


def sql_blocks() -> List[Block]:
    pages = doc_pages() + ([ROOT / "README.md"] if (ROOT / "README.md").exists() else [])
    return [b for p in pages for b in code_blocks(p) if b.lang == "sql"]


# ---------------------------------------------------------------------------------------
# Running sql blocks
# ---------------------------------------------------------------------------------------


@dataclasses.dataclass
class Statement:
    sql: str
    line: int  # line within the block (1-based)
    expect: List[str]  # the `-- →` texts, one per row


_ARROW = re.compile(r"--\s*→\s?(.*)$")


def split_statements(body: str) -> List[Statement]:
    """Statements of a block with the `-- →` comments that follow each one."""
    out: List[Statement] = []
    buf: List[str] = []
    start = 0
    for n, line in enumerate(body.splitlines(), 1):
        m = _ARROW.search(line)
        if not buf and not line.strip():
            continue
        if not buf and m and line.strip().startswith("--"):
            if not out:
                raise AssertionError(f"line {n}: a `-- →` comment before any statement")
            out[-1].expect.append(m.group(1).rstrip())
            continue
        if not buf:
            start = n
        buf.append(line)
        text = "\n".join(buf) + "\n"
        if apsw.complete(text):
            out.append(Statement(text, start, [m.group(1).rstrip()] if m else []))
            buf = []
    if (
        buf
        and "".join(buf).strip()
        and not all(l.strip().startswith("--") or not l.strip() for l in buf)
    ):
        raise AssertionError(f"line {start}: statement without a terminating semicolon")
    return out


def render(value: Any) -> str:
    """A value as the sqlite3 shell prints it in list mode (but NULL as ``NULL``)."""
    if value is None:
        return "NULL"
    if isinstance(value, float):
        s = "%.15g" % value
        if s in ("inf", "-inf"):
            return s.replace("inf", "Inf")
        mant, _, exp = s.partition("e")
        if "." not in mant:
            mant += ".0"
        return mant + ("e" + exp if exp else "")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "X'" + bytes(value).hex().upper() + "'"
    return str(value)


def value_matches(expected: str, actual: str) -> bool:
    expected = expected.strip()
    if expected.endswith("..."):
        return actual.startswith(expected[:-3])
    return expected == actual


def check_rows(expect: List[str], rows: List[Tuple[Any, ...]]) -> Optional[str]:
    """None when ``rows`` are what the `-- →` lines say, else what differs."""
    got = ["|".join(render(v) for v in row) for row in rows]
    if expect == ["(no rows)"]:
        return None if not rows else f"expected no rows, got {got}"
    if len(expect) != len(rows):
        return f"expected {len(expect)} row(s) {expect}, got {len(rows)}: {got}"
    for e, row, g in zip(expect, rows, got):
        evals = e.split("|")
        avals = [render(v) for v in row]
        if len(evals) != len(avals) or not all(value_matches(x, y) for x, y in zip(evals, avals)):
            return f"expected {e!r}, got {g!r}"
    return None


class _NullDefault(dict):
    """Named parameters: those not given are bound to NULL."""

    def __missing__(self, key: str) -> None:
        return None


def directives(body: str) -> Tuple[Set[str], Dict[str, Any]]:
    """(`-- needs:` values, `-- params:` mapping) from a block's leading comment lines."""
    needs: Set[str] = set()
    params: Dict[str, Any] = {}
    for line in body.splitlines():
        s = line.strip()
        if not s:
            continue
        if not s.startswith("--"):
            break
        m = re.match(r"--\s*needs:\s*(.+)$", s)
        if m:
            needs |= {x.strip() for x in m.group(1).split(",") if x.strip()}
        m = re.match(r"--\s*params:\s*(.+)$", s)
        if m:
            params.update(json.loads(m.group(1)))
    unknown = needs - {"memory-db", "previous", "sqlite-vec"}
    if unknown:
        raise AssertionError(f"unknown `-- needs:` value(s) {sorted(unknown)}")
    return needs, params


def load_sqlite_vec(conn: apsw.Connection) -> None:
    sqlite_vec = pytest.importorskip(
        "sqlite_vec", reason="sqlite-vec is not installed: pip install 'sqlite-rrf[knn]'"
    )
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    conn.enable_load_extension(False)


def run_statements(conn: apsw.Connection, body: str, params: Dict[str, Any]) -> List[str]:
    """Run a block's statements; returns the failures (empty when all is as documented)."""
    failures = []
    for st in split_statements(body):
        where = f"statement at block line {st.line}"
        error_expected = len(st.expect) == 1 and st.expect[0].startswith("error:")
        try:
            rows = conn.execute(st.sql, _NullDefault(params)).fetchall()
        except apsw.Error as e:
            if error_expected:
                want = st.expect[0][len("error:") :].strip()
                if not value_matches(want, str(e)):
                    failures.append(f"{where}: expected error {want!r}, got {str(e)!r}")
                continue
            failures.append(f"{where} failed: {type(e).__name__}: {e}\n{st.sql}")
            break
        if error_expected:
            failures.append(f"{where}: expected {st.expect[0]!r}, got rows {rows}")
        elif st.expect:
            diff = check_rows(st.expect, rows)
            if diff:
                failures.append(f"{where}: {diff}\n{st.sql}")
    return failures


def new_connection(path: str = ":memory:") -> apsw.Connection:
    conn = apsw.Connection(path)
    sqlite_rrf.load(conn)
    return conn


# ---------------------------------------------------------------------------------------
# The memory database of the examples (docs/recall.md's JSONL block)
# ---------------------------------------------------------------------------------------


def example_episodes() -> Tuple[str, List[Dict[str, Any]]]:
    blocks = [b for b in code_blocks(DOCS / "recall.md") if b.lang == "jsonl"]
    assert len(blocks) == 1, "docs/recall.md must have exactly one ```jsonl block"
    text = blocks[0].body
    return text, [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.fixture(scope="session")
def memory_db(tmp_path_factory) -> Path:
    """The episodes database every `-- needs: memory-db` example runs against."""
    path = tmp_path_factory.mktemp("docs") / "memory.db"
    with Store(path) as s:
        s.add_many(example_episodes()[1])
    # one file to copy: fold the WAL back into the database
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.close()
    return path


# ---------------------------------------------------------------------------------------
# SQL functions: pages, signatures, error messages
# ---------------------------------------------------------------------------------------


def registered_functions() -> Dict[str, Dict[str, Any]]:
    """{name: {"nargs": {...}, "type": 's'|'a'|'w'}} added by loading the extension."""
    q = "SELECT name, narg, type FROM pragma_function_list"
    plain = apsw.Connection(":memory:")
    loaded = new_connection()
    added = set(loaded.execute(q)) - set(plain.execute(q))
    out: Dict[str, Dict[str, Any]] = {}
    for name, narg, ftype in added:
        f = out.setdefault(name, {"nargs": set(), "types": set()})
        f["nargs"].add(narg)
        f["types"].add(ftype)
    return out


def page_signature(page: Path) -> Tuple[str, Set[int], str]:
    """(function name, arities, title) from the page's title: '# `f(a [, b])` → T'."""
    title = next(
        (l for l in page.read_text(encoding="utf-8").splitlines() if l.startswith("# ")), ""
    )
    m = re.search(r"`(\w+)\(([^`]*)\)`", title)
    if not m:
        return "", set(), title
    name, args = m.group(1), m.group(2)
    required = len(re.findall(r"\w+", args.split("[", 1)[0]))
    total = len(re.findall(r"\w+", args))
    return name, set(range(required, total + 1)), title


def function_page_problems(functions: Dict[str, Dict[str, Any]], sql_docs: Path) -> List[str]:
    """What is missing or wrong in the function pages (empty when all is documented)."""
    problems = []
    for name, f in sorted(functions.items()):
        page = sql_docs / f"{name}.md"
        if not page.exists():
            problems.append(f"{name}: no page {page.relative_to(ROOT)}")
            continue
        title_name, arities, title = page_signature(page)
        if title_name != name:
            problems.append(f"{name}: the title of {page.name} does not name it: {title!r}")
        elif arities != f["nargs"] and f["nargs"] != {-1}:  # -1: an FTS5 auxiliary function
            problems.append(
                f"{name}: the title's signature takes {sorted(arities)} "
                f"arguments; the extension registers {sorted(f['nargs'])}"
            )
        text = page.read_text(encoding="utf-8")
        if "w" in f["types"] and "window function" not in text:
            problems.append(f"{name}: registered as a window function; {page.name} does not say so")
        if not any(b.lang == "sql" and "fragment" not in b.attrs for b in code_blocks(page)):
            problems.append(f"{name}: {page.name} has no ```sql example")
        if "-- →" not in text:
            problems.append(f"{name}: {page.name} shows no checked result (`-- →`)")
    return problems


def c_string_literals(source: str) -> List[str]:
    """The string literals of C source, adjacent literals joined, comments skipped."""
    source = re.sub(r"/\*.*?\*/", " ", source, flags=re.S)
    source = re.sub(r"//[^\n]*", " ", source)
    lit = r'"(?:[^"\\\n]|\\.)*"'
    out = []
    for group in re.finditer(rf"(?:{lit}\s*)+", source):
        parts = re.findall(lit, group.group(0))
        text = "".join(p[1:-1] for p in parts)
        out.append(re.sub(r"\\(.)", r"\1", text))
    return out


_SPEC = re.compile(r"%[-+ #0!]*\d*(?:\.\d+)?(?:ll|l|h|z)?[diouxXeEfgGsScq]")


def template_regex(template: str) -> "re.Pattern[str]":
    """A printf template as a regex: each conversion matches any text."""
    parts = _SPEC.split(template)
    return re.compile(".+?".join(re.escape(p) for p in parts))


_FN_HELPER = re.compile(r"^[\w \t\*]*?\b(\w+)\(sqlite3_context \*ctx, const char \*fn\)\s*\{", re.M)


def error_templates() -> Dict[str, List[str]]:
    """{page: [message templates]}: the messages of csrc/*.c that start with a function's
    name (its page) or with 'sqlite-rrf' (loading and building; documented in faq.md);
    the messages of helpers ``f(ctx, fn)`` that start with ``%s: ``, for each function
    that calls them with its name; and the faults fuse.c composes into rrf_fuse's and
    rrf_explain's messages."""
    names = registered_functions()
    out: Dict[str, List[str]] = {}
    sources = {c: c.read_text(encoding="utf-8") for c in sorted(CSRC.glob("*.c"))}
    everything = "\n".join(sources.values())
    for c, src in sources.items():
        for s in c_string_literals(src):
            m = re.match(r"(\w+): ", s)
            if m and m.group(1) in names:
                out.setdefault(f"sql/{m.group(1)}.md", []).append(s)
            elif s.startswith("sqlite-rrf"):
                out.setdefault("faq.md", []).append(s)
        # helpers that prefix their message with the calling function's name
        helpers = [(m.start(), m.group(1)) for m in _FN_HELPER.finditer(src)]
        for i, (start, helper) in enumerate(helpers):
            end = next((p for p, _ in helpers[i + 1 :]), len(src))
            body = re.split(r"^\}", src[start:end], maxsplit=1, flags=re.M)[0]
            for s in c_string_literals(body):
                if not s.startswith("%s: "):
                    continue
                for fn in set(re.findall(rf"\b{helper}\(ctx, \"(\w+)\"\)", everything)):
                    if fn in names:
                        out.setdefault(f"sql/{fn}.md", []).append(fn + s[2:])
        if c.name == "fuse.c":
            faults = re.findall(r'arg_error\(ctx, fn, "(\w+)", "([^"]+)"', src)
            faults += [(w, "must be finite") for w in ("rank", "weight", "k")]
            for fn in ("rrf_fuse", "rrf_explain"):
                for what, fault in faults:
                    out.setdefault(f"sql/{fn}.md", []).append(f"{fn}: {what} {fault}, got %s")
                for what in ("rank", "weight", "k"):
                    out.setdefault(f"sql/{fn}.md", []).append(
                        f"{fn}: {what} must be a number, got %s"
                    )
    return out


# ---------------------------------------------------------------------------------------
# The CLI
# ---------------------------------------------------------------------------------------


def cli_commands(parser: argparse.ArgumentParser) -> Dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def cli_doc_problems(parser: argparse.ArgumentParser, text: str) -> List[str]:
    """Commands without a section in ``text`` (docs/cli.md) and options a section omits."""
    problems = []
    heads = [(m.start(), m.group(1)) for m in re.finditer(r"^#{2,3} `sqlite-rrf (\w+)", text, re.M)]
    sections = {}
    for i, (pos, cmd) in enumerate(heads):
        end = heads[i + 1][0] if i + 1 < len(heads) else len(text)
        sections[cmd] = sections.get(cmd, "") + text[pos:end]  # a command's subsections too
    for cmd, sub in cli_commands(parser).items():
        if cmd not in sections:
            problems.append(f"`sqlite-rrf {cmd}` has no section (## `sqlite-rrf {cmd} …`)")
            continue
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction) or not action.option_strings:
                continue
            opt = max(action.option_strings, key=len)
            if not re.search(rf"`{re.escape(opt)}\b", sections[cmd]):
                problems.append(f"`sqlite-rrf {cmd}`: option {opt} is not documented")
    return problems


# ---------------------------------------------------------------------------------------
# The Python API
# ---------------------------------------------------------------------------------------


def python_api_names() -> List[str]:
    names = list(sqlite_rrf.__all__)
    names += [n for n in dir(Store) if not n.startswith("_")]  # its parts' names too
    names += [f.name for f in dataclasses.fields(RecallHit)]
    names += [f.name for f in dataclasses.fields(RecallResult)]
    names += [f.name for f in dataclasses.fields(Episode)]
    names += [
        "as_dict",
        "Store",
        "StoreError",
        "RecallHit",
        "RecallResult",
        "Episode",
        "MAX_QUERY_CHARS",
        "TOPIC_GATE_COSINE",
    ]
    names += [n for n in vars(Embedder) if not n.startswith("_")]
    names += ["Embedder", "EmbeddingError", "ModelNotFoundError", "default_model_path"]
    names += [
        "DEFAULT_MODEL",
        "DEFAULT_N_CTX",
        "MODEL_ENV",
        "parse_spec",
        "model_candidates",
        "choose_model",
        "resolve_model",
        "fingerprint",
        "fingerprint_cosine",
        "FINGERPRINT_TEXTS",
        "FINGERPRINT_MIN_COSINE",
    ]
    names += [
        n
        for n, v in vars(kernels).items()
        if inspect.isfunction(v) and not n.startswith("_") and v.__module__ == kernels.__name__
    ]
    names += [n for n in ("migrate", "current_version", "MigrationError") if hasattr(migrations, n)]
    names += [n for n in ("PROFILES", "POOL_MODES", "LISTS") if hasattr(store_mod, n)]
    return sorted(set(names))


def undocumented_names(names: Iterable[str], text: str) -> List[str]:
    """Names that occur in no `code span` of ``text`` (as a whole word)."""
    spans = re.findall(r"`([^`\n]+)`", text)
    return [n for n in names if not any(re.search(rf"\b{re.escape(n)}\b", s) for s in spans)]


# ---------------------------------------------------------------------------------------
# The tests: coverage of functions, commands and names
# ---------------------------------------------------------------------------------------


@needs_docs
def test_every_registered_function_has_a_page():
    functions = registered_functions()
    assert {"vec_cosine", "rrf_fuse", "rrf_explain", "fts5_query"} <= set(functions)
    assert function_page_problems(functions, DOCS / "sql") == []


@needs_docs
def test_a_function_without_a_page_is_reported():
    functions = dict(registered_functions())
    functions["rrf_undocumented"] = {"nargs": {1}, "types": {"s"}}
    functions["rrf_fuse"] = {"nargs": {1, 2, 3, 4}, "types": {"w"}}
    problems = function_page_problems(functions, DOCS / "sql")
    assert any(p.startswith("rrf_undocumented: no page") for p in problems)
    assert any(p.startswith("rrf_fuse: the title's signature") for p in problems)


@needs_docs
def test_function_pages_are_linked_from_the_index():
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    for name in registered_functions():
        assert f"(sql/{name}.md)" in index, f"docs/index.md does not link sql/{name}.md"


@needs_docs
def test_every_error_message_is_documented():
    missing = []
    for page, templates in error_templates().items():
        text = (DOCS / page).read_text(encoding="utf-8")
        for t in templates:
            if not template_regex(t).search(text):
                missing.append(f"docs/{page}: {t!r}")
    assert missing == []


def test_c_messages_are_found():
    """The extraction of messages from the C source finds what it should."""
    templates = error_templates()
    assert "vec_cosine: dimension mismatch: %llu vs %llu" in templates["sql/vec_cosine.md"]
    assert (
        "sqlite-rrf needs SQLite 3.25.0 or newer (window functions); this is %s"
        in templates["faq.md"]
    )
    assert "rrf_fuse: rank must be >= 1 (ranks are 1-based), got %s" in templates["sql/rrf_fuse.md"]
    assert template_regex("f: %d of %llu").fullmatch("f: 3 of 12")
    if "overflow_error" in (CSRC / "fuse.c").read_text(encoding="utf-8"):
        assert (
            "rrf_explain: the sum of contributions overflows a double (weights too large)"
            in templates["sql/rrf_explain.md"]
        )


@needs_docs
def test_every_cli_command_is_documented():
    parser = cli.build_parser()
    commands = cli_commands(parser)
    assert {
        "init",
        "import",
        "add",
        "recall",
        "stats",
        "path",
        "sql",
        "knn",
        "demo",
        "eval",
    } <= set(commands)
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    assert cli_doc_problems(parser, text) == []


def test_an_undocumented_command_or_option_is_reported():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    p = sub.add_parser("frobnicate")
    p.add_argument("--level")
    text = "## `sqlite-rrf init DB`\n\n## `sqlite-rrf frobnicate`\n"
    problems = cli_doc_problems(parser, text)
    assert "`sqlite-rrf frobnicate`: option --level is not documented" in problems
    assert "`sqlite-rrf recall` has no section (## `sqlite-rrf recall …`)" in problems


@needs_docs
def test_python_api_is_documented():
    text = (DOCS / "python.md").read_text(encoding="utf-8")
    names = python_api_names()
    assert {"load", "loadable_path", "ExtensionLoadError", "recall", "add_many"} <= set(names)
    assert undocumented_names(names, text) == []
    assert undocumented_names(["no_such_api"], text) == ["no_such_api"]


# ---------------------------------------------------------------------------------------
# The tests: examples run
# ---------------------------------------------------------------------------------------

_SQL_BLOCKS = sql_blocks()


@pytest.mark.parametrize(
    "block", [b for b in _SQL_BLOCKS if "fragment" not in b.attrs], ids=lambda b: b.where()
)
def test_sql_example_runs(block: Block, request):
    needs, params = directives(block.body)
    if "previous" in needs:
        conn = _previous_connection(block, request)
    elif "memory-db" in needs:
        db = request.getfixturevalue("memory_db")
        copy = request.getfixturevalue("tmp_path") / "memory.db"
        shutil.copy(db, copy)
        conn = new_connection(str(copy))
    else:
        conn = new_connection()
    if "sqlite-vec" in needs:
        load_sqlite_vec(conn)
    failures = run_statements(conn, block.body, params)
    assert not failures, f"{block.where()}:\n" + "\n".join(failures)


def _previous_connection(block: Block, request) -> apsw.Connection:
    """A connection on which the page's sql blocks before ``block`` have run, back to
    the last block that does not say `-- needs: previous`."""
    page = [b for b in code_blocks(block.path) if b.lang == "sql" and "fragment" not in b.attrs]
    i = next(n for n, b in enumerate(page) if b.line == block.line)
    start = i
    while start > 0 and "previous" in directives(page[start].body)[0]:
        start -= 1
    first_needs, _ = directives(page[start].body)
    if "memory-db" in first_needs:
        db = request.getfixturevalue("memory_db")
        copy = request.getfixturevalue("tmp_path") / "memory.db"
        shutil.copy(db, copy)
        conn = new_connection(str(copy))
    else:
        conn = new_connection()
    for b in page[start:i]:
        needs, params = directives(b.body)
        if "sqlite-vec" in needs:
            load_sqlite_vec(conn)
        failures = run_statements(conn, b.body, params)
        assert not failures, f"{b.where()} (run before {block.where()}):\n" + "\n".join(failures)
    return conn


@pytest.mark.parametrize(
    "body, params, ok",
    [
        ("SELECT 1 + 1;  -- → 2\n", {}, True),
        ("SELECT 1 + 1;  -- → 3\n", {}, False),
        ("SELECT rrf_fuse(1);  -- → 0.0163...\n", {}, True),
        (
            "SELECT vec_cosine('[1]', '[1, 2]');  -- → error: vec_cosine: dimension mismatch: 1 vs 2\n",
            {},
            True,
        ),
        ("SELECT vec_cosine('[1]', '[1]');  -- → error: something\n", {}, False),
        ("SELECT 1, NULL UNION ALL SELECT 2, 'x';\n-- → 1|NULL\n-- → 2|x\n", {}, True),
        ("SELECT 1 WHERE 0;  -- → (no rows)\n", {}, True),
        ("SELECT :a, :b;  -- → 5|NULL\n", {"a": 5}, True),
        ("SELECT no_such_function();\n", {}, False),
    ],
)
def test_sql_checker_can_fail(body, params, ok):
    assert (run_statements(new_connection(), body, params) == []) is ok


def test_render_is_the_shells():
    assert [render(v) for v in (None, 1, 1.0, 0.96, 1 / 61, "a", b"\x01\xff")] == [
        "NULL",
        "1",
        "1.0",
        "0.96",
        "0.0163934426229508",
        "a",
        "X'01FF'",
    ]


@pytest.mark.parametrize(
    "block", [b for b in _SQL_BLOCKS if "fragment" in b.attrs], ids=lambda b: b.where()
)
def test_sql_fragment_is_verbatim(block: Block):
    def norm(text: str) -> str:
        return "\n".join(l.rstrip() for l in text.strip("\n").splitlines())

    sources = [norm(p.read_text(encoding="utf-8")) for p in sorted(SQL_DIR.rglob("*.sql"))]
    assert any(norm(block.body) in s for s in sources), (
        f"{block.where()}: the ```sql fragment is not verbatim in sql/"
    )


@needs_docs
def test_recall_page_quotes_every_cte():
    """docs/recall.md quotes each CTE of sql/recall.sql (a new CTE needs its note)."""
    ctes = re.findall(
        r"^(\w+) AS (?:MATERIALIZED )?\(",
        (SQL_DIR / "recall.sql").read_text(encoding="utf-8"),
        re.M,
    )
    assert len(ctes) >= 8
    quoted = "\n".join(
        b.body for b in code_blocks(DOCS / "recall.md") if b.lang == "sql" and "fragment" in b.attrs
    )
    missing = [c for c in ctes if not re.search(rf"^{c} AS (?:MATERIALIZED )?\(", quoted, re.M)]
    assert missing == []


# ---- python blocks and console sessions of the pages this suite owns ----


def _model_path() -> Optional[str]:
    from sqlite_rrf.embedding.embedder import default_model_path

    path = default_model_path()
    if path is None or not os.path.isfile(path):
        return None
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return None
    return path


def _block_needs(body: str) -> Set[str]:
    """What a python or console block's first line `# needs: a, b` asks for."""
    first = next((l.strip() for l in body.splitlines() if l.strip()), "")
    m = re.match(r"#\s*needs:\s*(.+)$", first)
    needs = {x.strip() for x in m.group(1).split(",")} if m else set()
    unknown = needs - {"model", "sqlite-vec", "mcp"}
    assert not unknown, f"unknown `# needs:` value(s) {sorted(unknown)}"
    return needs


def _missing(needs: Set[str]) -> Optional[str]:
    """Why a block's needs cannot be met here, or None."""
    if "model" in needs and _model_path() is None:
        return "needs the embedding model (SQLITE_RRF_MODEL) and llama-cpp-python"
    if "sqlite-vec" in needs:
        try:
            import sqlite_vec  # noqa: F401
        except ImportError:
            return "needs sqlite-vec: pip install 'sqlite-rrf[knn]'"
    if "mcp" in needs:
        try:
            import mcp.server.mcpserver  # noqa: F401
        except ImportError:
            return "needs the MCP SDK 2.x: pip install 'sqlite-rrf[mcp]'"
    return None


_SHELL_PROBLEM: List[Optional[str]] = []


def _shell_problem() -> Optional[str]:
    """Why the sqlite3 shell cannot replay the sessions here (None when it can): it must
    exist, load the extension and be SQLite 3.35 or newer (the recall statement)."""
    if not _SHELL_PROBLEM:
        problem = None
        if shutil.which("sqlite3") is None:
            problem = "the sqlite3 shell is not installed"
        else:
            script = f".load {sqlite_rrf.loadable_path()}\nSELECT sqlite_version();\n"
            try:
                p = subprocess.run(
                    ["sqlite3", ":memory:"],
                    input=script,
                    text=True,
                    capture_output=True,
                    timeout=60,
                )
                version = tuple(int(x) for x in p.stdout.strip().split(".")[:2])
                if p.returncode != 0 or version < (3, 35):
                    problem = f"the sqlite3 shell cannot run the sessions: {p.stdout}{p.stderr}"
            except (OSError, ValueError, subprocess.SubprocessError) as e:
                problem = f"the sqlite3 shell cannot load the extension: {e}"
        _SHELL_PROBLEM.append(problem)
    return _SHELL_PROBLEM[0]


def _own_blocks(lang: str) -> List[Tuple[Path, List[Block]]]:
    out = []
    for page in doc_pages():
        if str(page.relative_to(DOCS)) in OTHERS_PAGES:
            continue
        blocks = [b for b in code_blocks(page) if b.lang == lang]
        if blocks:
            out.append((page, blocks))
    return out


def _workdir(tmp_path: Path) -> Path:
    """A working directory holding docs/recall.md's episodes.jsonl."""
    (tmp_path / "episodes.jsonl").write_text(example_episodes()[0], encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize(
    "page, blocks",
    _own_blocks("python"),
    ids=lambda x: str(x.relative_to(DOCS)) if isinstance(x, Path) else "",
)
def test_python_examples_run(page: Path, blocks: List[Block], tmp_path, monkeypatch):
    """A page's python blocks run in order in one namespace, in a fresh directory;
    a block starting with `# needs: model` (or `sqlite-vec`) is skipped without it."""
    monkeypatch.chdir(_workdir(tmp_path))
    model = _model_path()
    if model:
        monkeypatch.setenv("SQLITE_RRF_MODEL", model)
    namespace: Dict[str, Any] = {"__name__": "__docs__"}
    ran = 0
    try:
        for b in blocks:
            if _missing(_block_needs(b.body)):
                continue
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    exec(compile(b.body, b.where(), "exec"), namespace)
            except Exception as e:
                raise AssertionError(f"{b.where()}: {type(e).__name__}: {e}") from e
            ran += 1
    finally:
        for v in list(namespace.values()):  # close what the examples left open
            if isinstance(v, (Store, apsw.Connection, Embedder)):
                with contextlib.suppress(Exception):
                    v.close()
    if not ran:
        pytest.skip("every python block needs the embedding model or sqlite-vec")


# Console sessions: `$ ` lines are commands (sqlite-rrf, python -m sqlite_rrf, sqlite3),
# `sqlite> ` and `   ...> ` lines are input to the sqlite3 shell opened by the last
# `$ sqlite3 DB`, every other line is expected output, matched in order against what the
# commands print (whitespace runs are one space; `…` matches any text; lines that are
# only `…` are skipped).


def _line_regex(expected: str) -> "re.Pattern[str]":
    parts = [re.escape(" ".join(p.split())) for p in expected.strip().split("…")]
    return re.compile(r"\s*" + ".*".join(parts) + r"\s*")


def output_problems(expected: List[str], actual: str) -> List[str]:
    lines = [" ".join(l.split()) for l in actual.splitlines()]
    pos = 0
    for e in expected:
        if not e.strip() or e.strip() == "…":
            continue
        rx = _line_regex(e)
        for i in range(pos, len(lines)):
            if rx.fullmatch(lines[i]):
                pos = i + 1
                break
        else:
            return [f"expected output line not found (in order): {e!r}\n--- got:\n{actual}"]
    return []


def _load_path(arg: str) -> str:
    base = os.path.basename(arg)
    if base == "rrf":
        return sqlite_rrf.loadable_path()
    if base == "vec0":
        return pytest.importorskip(
            "sqlite_vec", reason="sqlite-vec is not installed: pip install 'sqlite-rrf[knn]'"
        ).loadable_path()
    return arg


def _run(argv: List[str], cwd: Path, stdin: Optional[str] = None) -> Tuple[int, str]:
    p = subprocess.run(argv, cwd=cwd, input=stdin, text=True, capture_output=True, timeout=600)
    return p.returncode, p.stdout + p.stderr


def replay(block: Block, cwd: Path) -> List[str]:
    """Replay one console block in ``cwd``; returns the problems found."""
    problems: List[str] = []
    steps: List[Tuple[str, List[str], List[str]]] = []  # (command, shell input, expected)
    for line in block.body.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:].strip(), [], []))
        elif line.startswith("sqlite> ") or line.strip().startswith("...> "):
            assert steps, f"{block.where()}: shell input before `$ sqlite3 DB`"
            steps[-1][1].append(line.split("> ", 1)[1])
        elif line.strip().startswith("#") and not steps:
            continue  # a leading `# needs: …` comment
        elif steps:
            steps[-1][2].append(line)
    for command, shell_input, expected in steps:
        argv = shlex.split(command)
        redirect = None
        if ">" in argv:
            i = argv.index(">")
            argv, redirect = argv[:i], argv[i + 1]
        if argv[0] == "sqlite-rrf":
            argv = [sys.executable, "-m", "sqlite_rrf"] + argv[1:]
        elif argv[0] in ("python", "python3"):
            argv = [sys.executable] + argv[1:]
        elif argv[0] == "sqlite3":
            problem = _shell_problem()
            if problem:
                pytest.skip(problem)
        else:
            problems.append(f"{block.where()}: cannot replay `{command}`")
            continue
        stdin = None
        if argv[0] == "sqlite3":
            script = []
            for s in shell_input:
                if s.startswith(".load "):
                    s = ".load " + _load_path(s.split(None, 1)[1].strip())
                script.append(s)
            stdin = "\n".join(script) + "\n"
        rc, out = _run(argv, cwd, stdin)
        if redirect:
            (cwd / redirect).write_text(out, encoding="utf-8")
            out = ""
        shows_error = any(re.search(r"(?i)error|no such|^\s*sqlite-rrf: ", e) for e in expected)
        if rc != 0 and not shows_error:
            problems.append(f"{block.where()}: `{command}` exited {rc}:\n{out}")
            continue
        if (
            argv[0] == "sqlite3"
            and not shows_error
            and re.search(r"^(Error|Parse error|Runtime error)", out, re.M)
        ):
            problems.append(f"{block.where()}: the sqlite3 session failed:\n{out}")
            continue
        problems += [f"{block.where()}: `{command}`: {p}" for p in output_problems(expected, out)]
    return problems


@pytest.mark.parametrize(
    "page, blocks",
    _own_blocks("console"),
    ids=lambda x: str(x.relative_to(DOCS)) if isinstance(x, Path) else "",
)
def test_console_sessions_replay(page: Path, blocks: List[Block], tmp_path, monkeypatch):
    """A page's console blocks replayed in order in one fresh directory that holds
    docs/recall.md's episodes.jsonl. A page with a block that starts with
    `# needs: model` (or `sqlite-vec`) is skipped without it, and one with a sqlite3
    session where the shell cannot load the extension or is older than 3.35."""
    cwd = _workdir(tmp_path)
    model = _model_path()
    for b in blocks:
        missing = _missing(_block_needs(b.body))
        if missing:
            pytest.skip(missing)
    if model:
        monkeypatch.setenv("SQLITE_RRF_MODEL", model)
    problems = []
    for b in blocks:
        problems += replay(b, cwd)
    assert problems == []


def test_output_matching_can_fail():
    assert output_problems(["a …", "c"], "a b\nc\n") == []
    assert output_problems(["c", "a …"], "a b\nc\n") != []
    assert output_problems(["…", "  x   =  1"], "x = 1\n") == []
