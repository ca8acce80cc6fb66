"""README.md's shell steps work for a pip user, from any directory.

Every ```` ```console ```` session of README.md is parsed out of the file and replayed, in
order, in an empty temporary directory outside the checkout, with the installed
``sqlite-rrf`` (the virtual environment's ``bin/``, first on ``PATH``) and the system's
``sqlite3`` shell (Debian's at ``/usr/bin/sqlite3`` here): ``$`` lines run in ``sh``,
``sqlite>`` lines go to the shell opened by the last ``$ sqlite3 DB``, the other lines are
the expected output, matched in order (``…`` stands for any text; a line that is only
``…`` is skipped). A ``.load`` argument must be the path the session's ``sqlite-rrf path``
printed (``…`` standing for its directories); it is replaced by that path, nothing else.

A sqlite3 session that ``.read``s a statement must print labeled columns: the labels of
each hit are the statement's column names (all 19 of the recall statement), and the hits
are the ones the same statement gives through apsw with the same parameters, in the same
order; the recall of the README finds ``ep-001`` first.

No step of the README that runs the shell names a path that only exists in the checkout
(``demo/``, ``pysrc/``, ``sql/``): only the ``make`` commands, which are for the checkout,
may.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import apsw
import pytest

import sqlite_rrf

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
SHARED_MODEL = ROOT.parent / "shared" / "models" / "all-MiniLM-L6-v2-f16.gguf"
#: Paths that exist only in the checkout, not for a pip user.
CHECKOUT_PATHS = re.compile(r"(?<![\w.])(?:\./)?(?:demo|pysrc|sql|csrc|tests)/")

pytestmark = pytest.mark.skipif(not README.exists(), reason="README.md is not shipped here")


# ---- the README's code blocks ----


def code_blocks(text: str) -> List[Tuple[int, str, List[str]]]:
    """(line of the opening fence, info string, body lines) of each fenced block."""
    out: List[Tuple[int, str, List[str]]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^(`{3,})\s*(.*)$", lines[i])
        if not m:
            i += 1
            continue
        fence, info = m.group(1), m.group(2).strip()
        j = i + 1
        while j < len(lines) and lines[j].strip() != fence:
            j += 1
        out.append((i + 1, info, lines[i + 1 : j]))
        i = j + 1
    return out


class Step:
    """One ``$`` command of a session, the shell input that follows it, its output."""

    def __init__(self, where: str, command: str) -> None:
        self.where = where
        self.command = command
        self.shell_input: List[str] = []
        self.expected: List[str] = []


def sessions(text: str) -> List[Step]:
    """The steps of every console block of ``text``, in order."""
    steps: List[Step] = []
    for line_no, info, body in code_blocks(text):
        if info.split()[:1] != ["console"]:
            continue
        block_steps: List[Step] = []
        for n, line in enumerate(body, line_no + 1):
            if line.startswith("$ "):
                block_steps.append(Step(f"README.md:{n}", line[2:].strip()))
            elif line.startswith("sqlite> ") or line.strip().startswith("...> "):
                assert block_steps, f"README.md:{n}: shell input before `$ sqlite3 DB`"
                block_steps[-1].shell_input.append(line.split("> ", 1)[1])
            elif block_steps:
                block_steps[-1].expected.append(line)
            elif line.strip():
                raise AssertionError(f"README.md:{n}: output before any `$` command")
        steps += block_steps
    return steps


# ---- matching output ----


def _pattern(expected: str) -> "re.Pattern[str]":
    parts = [re.escape(" ".join(p.split())) for p in expected.strip().split("…")]
    return re.compile(r"\s*" + ".*".join(parts) + r"\s*")


def output_problems(expected: List[str], actual: str) -> List[str]:
    """The expected lines not found, in order, in ``actual`` (whitespace runs are one
    space, ``…`` any text, a line that is only ``…`` skipped); [] when all are."""
    lines = [" ".join(l.split()) for l in actual.splitlines()]
    pos = 0
    for e in expected:
        if not e.strip() or e.strip() == "…":
            continue
        rx = _pattern(e)
        for i in range(pos, len(lines)):
            if rx.fullmatch(lines[i]):
                pos = i + 1
                break
        else:
            return [f"expected output line not found (in order): {e!r}\n--- got:\n{actual}"]
    return []


def line_mode_records(out: str) -> List[Dict[str, str]]:
    """The records the shell prints in ``.mode line``: ``name = value`` lines, a blank
    line between records."""
    records: List[Dict[str, str]] = []
    current: Dict[str, str] = {}
    for line in out.splitlines():
        m = re.match(r"^\s*(\w+) = ?(.*)$", line)
        if m:
            if m.group(1) in current:  # a record without the blank line after it
                records.append(current)
                current = {}
            current[m.group(1)] = m.group(2)
        elif not line.strip() and current:
            records.append(current)
            current = {}
    if current:
        records.append(current)
    return records


# ---- the environment of a pip user ----


def venv_bin() -> Path:
    """The bin/ of the environment the tests run in, where pip put ``sqlite-rrf``."""
    return Path(sys.executable).parent


def user_env(tmp: Path) -> Dict[str, str]:
    """A pip user's environment: the installed ``sqlite-rrf`` and the system's tools on
    PATH, a home and caches of its own, no model hub; the shared GGUF model as
    ``SQLITE_RRF_MODEL`` when it is here (as ``make demo`` does), else no model."""
    keep = ("LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR")
    env = {k: v for k, v in os.environ.items() if k in keep}
    (tmp / "home").mkdir(exist_ok=True)
    env.update(
        PATH=f"{venv_bin()}{os.pathsep}/usr/bin{os.pathsep}/bin",
        HOME=str(tmp / "home"),
        XDG_CACHE_HOME=str(tmp / "home" / ".cache"),
        HF_HUB_OFFLINE="1",
        HF_HOME=str(tmp / "home" / "hf"),
    )
    try:
        import llama_cpp  # noqa: F401

        if SHARED_MODEL.is_file():
            env["SQLITE_RRF_MODEL"] = str(SHARED_MODEL)
    except ImportError:
        pass
    return env


def shell_problem(env: Dict[str, str]) -> Optional[str]:
    """Why the sqlite3 shell on ``env``'s PATH cannot replay the sessions, or None."""
    sqlite3 = shutil.which("sqlite3", path=env["PATH"])
    if sqlite3 is None:
        return "the sqlite3 shell is not installed"
    p = subprocess.run(
        [sqlite3, ":memory:"],
        text=True,
        capture_output=True,
        timeout=60,
        input=f".load {sqlite_rrf.loadable_path()}\nSELECT sqlite_version();\n",
    )
    try:
        version = tuple(int(x) for x in p.stdout.strip().split(".")[:2])
    except ValueError:
        version = ()
    if p.returncode != 0 or version < (3, 35):
        return f"the sqlite3 shell cannot run the recall statement: {p.stdout}{p.stderr}"
    return None


# ---- replaying ----


def replay(steps: List[Step], cwd: Path, env: Dict[str, str]) -> Tuple[List[str], list]:
    """Replay ``steps`` in ``cwd``; returns the problems found and, for each sqlite3
    session, (step, its output, the .param values set, the .read file)."""
    problems: List[str] = []
    shell_runs = []
    printed_path: Optional[str] = None
    for step in steps:
        argv = shlex.split(step.command)
        stdin = None
        params: Dict[str, str] = {}
        read = None
        if argv[0] == "sqlite3":
            script = []
            for s in step.shell_input:
                if s.startswith(".load "):
                    arg = s.split(None, 1)[1].strip()
                    if "…" in arg:
                        if printed_path is None or not _pattern(arg).fullmatch(printed_path):
                            problems.append(
                                f"{step.where}: `.load {arg}` is not the path "
                                f"`sqlite-rrf path` printed ({printed_path!r})"
                            )
                            break
                        arg = printed_path
                    s = f".load {arg}"
                elif s.startswith(".param set "):
                    name, value = shlex.split(s)[2:4]
                    params[name.lstrip(":$@")] = value
                elif s.startswith(".read "):
                    read = s.split(None, 1)[1].strip()
                script.append(s)
            else:
                stdin = "\n".join(script) + "\n"
            if stdin is None:
                continue
        p = subprocess.run(
            ["sh", "-c", step.command],
            cwd=cwd,
            env=env,
            input=stdin,
            text=True,
            capture_output=True,
            timeout=600,
        )
        out = p.stdout + p.stderr
        if p.returncode != 0:
            problems.append(f"{step.where}: `{step.command}` exited {p.returncode}:\n{out}")
            continue
        if argv[0] == "sqlite3":
            if re.search(r"^(Error|Parse error|Runtime error)", out, re.M):
                problems.append(f"{step.where}: the sqlite3 session failed:\n{out}")
                continue
            shell_runs.append((step, p.stdout, params, read))
        if argv == ["sqlite-rrf", "path"]:
            printed_path = p.stdout.strip()
        problems += [
            f"{step.where}: `{step.command}`: {x}" for x in output_problems(step.expected, out)
        ]
    return problems, shell_runs


def statement_result(db: Path, sql: str, params: Dict[str, str]) -> Tuple[List[str], list]:
    """(column names, rows) of ``sql`` on ``db`` through apsw with the extension."""

    class NullDefault(dict):
        def __missing__(self, key: str) -> None:
            return None

    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        sqlite_rrf.load(conn)
        cur = conn.cursor()
        cur.execute(sql, NullDefault(params))
        try:
            names = [d[0] for d in cur.getdescription()]
        except apsw.ExecutionCompleteError:  # no rows
            names = []
        return names, cur.fetchall()
    finally:
        conn.close()


# ---- the tests ----


def test_readme_sessions_replay_outside_the_checkout(tmp_path):
    """Every console session of README.md, replayed in a fresh directory outside the
    checkout with the installed sqlite-rrf and the system's sqlite3 shell."""
    cwd = tmp_path / "anywhere"
    cwd.mkdir()
    assert ROOT not in cwd.resolve().parents
    env = user_env(tmp_path)
    assert (venv_bin() / "sqlite-rrf").exists(), "sqlite-rrf is not installed in this environment"
    problem = shell_problem(env)
    if problem:
        pytest.skip(problem)
    steps = sessions(README.read_text(encoding="utf-8"))
    commands = [s.command for s in steps]
    assert "sqlite-rrf path" in commands, "README shows no `sqlite-rrf path`"
    assert any(c.startswith("sqlite3 ") for c in commands), "README shows no sqlite3 session"
    problems, shell_runs = replay(steps, cwd, env)
    assert problems == []

    reads = [r for r in shell_runs if r[3]]
    assert reads, "no sqlite3 session of README.md reads the recall statement"
    for step, out, params, read in reads:
        db = cwd / shlex.split(step.command)[1]
        names, rows = statement_result(db, (cwd / read).read_text(encoding="utf-8"), params)
        assert len(names) == 19 and rows, (names, rows)
        records = line_mode_records(out)
        assert records, f"{step.where}: the shell printed no labeled columns:\n{out}"
        for r in records:
            assert list(r) == names, f"{step.where}: labels {list(r)}, statement {names}"
        assert [r["id"] for r in records] == [row[0] for row in rows]
        assert records[0]["id"] == "ep-001", records[0]


def test_readme_shell_steps_name_no_checkout_path():
    """No README line that runs the sqlite3 shell, `.load`s or `.read`s names a path that
    exists only in the checkout (the `make` commands are for the checkout and may)."""
    bad = []
    for line_no, info, body in code_blocks(README.read_text(encoding="utf-8")):
        for n, line in enumerate(body, line_no + 1):
            text = line.split("> ", 1)[1] if line.startswith("sqlite> ") else line
            text = text[2:] if text.startswith("$ ") else text
            runs_shell = re.match(r"\s*(sqlite3\b|\.load\b|\.read\b)", text)
            if runs_shell and CHECKOUT_PATHS.search(text):
                bad.append(f"README.md:{n}: {line}")
    assert bad == []


def test_the_checks_can_fail(tmp_path):
    """The parser, the matcher and the `.load` rule see what they are there to catch."""
    readme = (
        "```console\n$ sqlite-rrf path\n/…/sqlite_rrf/rrf\n$ sqlite3 m.db\n"
        "sqlite> .load /…/nowhere/rrf\nsqlite> SELECT 1;\n1\n```\n"
    )
    steps = sessions(readme)
    assert [s.command for s in steps] == ["sqlite-rrf path", "sqlite3 m.db"]
    assert steps[1].shell_input == [".load /…/nowhere/rrf", "SELECT 1;"]
    env = user_env(tmp_path)
    if shell_problem(env) is None and (venv_bin() / "sqlite-rrf").exists():
        problems, _ = replay(steps, tmp_path, env)
        assert len(problems) == 1 and "is not the path" in problems[0]
        steps[1].shell_input[0] = ".load /…/sqlite_rrf/rrf"
        steps[1].expected = ["2"]
        problems, _ = replay(steps, tmp_path, env)
        assert len(problems) == 1 and "'2'" in problems[0]
    assert output_problems(["a …", "c"], "a b\nc\n") == []
    assert output_problems(["c", "a …"], "a b\nc\n") != []
    assert line_mode_records("  id = a\nbody = x\n\n  id = b\nbody =\n") == [
        {"id": "a", "body": "x"},
        {"id": "b", "body": ""},
    ]
    assert line_mode_records("a|x\nb|y\n") == []
    assert CHECKOUT_PATHS.search("sqlite> .load pysrc/sqlite_rrf/rrf")
    assert CHECKOUT_PATHS.search("sqlite3 demo/sqlite-rrf-demo.db")
    assert not CHECKOUT_PATHS.search(".read recall.sql")
