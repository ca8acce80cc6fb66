"""What a new user met in a week with the command line, each as the
user meets it: the ``sqlite-rrf`` command in a subprocess, no model (SQLITE_RRF_MODEL
unset, an empty offline Hugging Face cache), a real SQLite file read back with apsw.

- a command that creates a memory says so on stderr (a mistyped path is seen at once),
  and one that then fails leaves no empty memory behind;
- ``--since``/``--until`` take what :mod:`sqlite_rrf.core.timeexpr` reads ("yesterday",
  "2 days ago", "last week"), and ``--since`` not before ``--until`` is an error naming
  both (recall, list, forget), never an empty answer;
- a mistyped command, choice or option gets "did you mean", and an unknown option is
  refused under its command's usage;
- a server started outside a project (no git work tree, the home directory) defaults to
  the shared scope and says the scope it serves.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import time
from pathlib import Path

import apsw
import pytest

from sqlite_rrf.store import Store

DAY = 86_400_000


def run(*args, cwd, env=None, timeout=120):
    """``python -m sqlite_rrf ARGS`` without a model (as tests/test_cli.py runs it)."""
    e = dict(os.environ)
    e.pop("SQLITE_RRF_MODEL", None)
    e["HF_HUB_OFFLINE"] = "1"
    e["HF_HUB_CACHE"] = os.path.join(str(cwd), "empty-hf-cache")
    e.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "sqlite_rrf", *[str(a) for a in args]],
        cwd=str(cwd),
        env=e,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def ids(path: Path):
    c = apsw.Connection(str(path))
    try:
        return sorted(r[0] for r in c.execute("SELECT id FROM episodes"))
    finally:
        c.close()


# ---- a new memory is said ----


def test_add_import_to_a_new_path_say_created(tmp_path):
    new = tmp_path / "memroy.db"  # the typo a user makes
    p = run("add", new, "Deploys go out on Tuesdays.", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert f"sqlite-rrf: created a new memory at {new}" in p.stderr.splitlines()
    p = run("add", new, "Staging is rebuilt nightly.", cwd=tmp_path)
    assert p.returncode == 0 and "created a new memory" not in p.stderr, p.stderr
    # import, with a relative path: the message names the absolute one
    src = tmp_path / "in.jsonl"
    src.write_text('{"id": "a", "content": "The VPN config is in the wiki."}\n')
    p = run("import", "other.db", src, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert f"sqlite-rrf: created a new memory at {tmp_path / 'other.db'}" in p.stderr
    assert ids(tmp_path / "other.db") == ["a"]
    # an existing memory: nothing said
    p = run("import", "other.db", src, "--replace", cwd=tmp_path)
    assert p.returncode == 0 and "created" not in p.stderr, p.stderr


def test_a_failed_add_leaves_no_new_memory(tmp_path):
    """A model named and missing: the add fails with one line, and the file it would
    have created is not left behind (nor its -wal, -shm)."""
    new = tmp_path / "fresh.db"
    p = run("add", new, "x", "--model", tmp_path / "no-such-model.gguf", cwd=tmp_path)
    assert p.returncode == 1
    assert "no-such-model.gguf" in p.stderr and "created" not in p.stderr
    assert [f.name for f in tmp_path.iterdir() if f.name.startswith("fresh")] == []


def test_a_missing_database_for_a_read_is_still_an_error(tmp_path):
    p = run("list", tmp_path / "nope.db", cwd=tmp_path)
    assert p.returncode == 1 and "no such database" in p.stderr
    assert not (tmp_path / "nope.db").exists()


# ---- dates ----


@pytest.fixture
def dated(tmp_path) -> Path:
    """Episodes created 0.5, 1.5, 3.5 and 10.5 days ago (the clock's now)."""
    now = int(time.time() * 1000)
    path = tmp_path / "dated.db"
    with Store(path) as s:
        for name, days in (("fresh", 0.5), ("day1", 1.5), ("day3", 3.5), ("old", 10.5)):
            s.add(f"note about backups {name}", id=name, created_at=int(now - days * DAY))
    return path


def _midnight(days_back: int) -> int:
    today = dt.datetime.now(dt.timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
    return int((today - dt.timedelta(days=days_back)).timestamp() * 1000)


def test_time_options_read_time_expressions():
    from sqlite_rrf.app import UserError, parse_time

    now = 1_800_000_000_000
    assert parse_time("2 days ago", "--since", now=now) == now - 2 * DAY
    assert parse_time("now", "--until", now=now) == now
    start = parse_time("yesterday", "--since", now=now)
    end = parse_time("yesterday", "--until", now=now)
    assert end - start == DAY and end <= now < end + DAY and start % DAY == 0
    assert parse_time("Last Week", "--since", now=now) == end - 7 * DAY
    assert parse_time("2026-11-24", "--since") == 1_795_478_400_000  # ISO, as before
    assert parse_time("1700000000000", "--until") == 1_700_000_000_000
    for bad in ("yesterdy", "backups yesterday", "2 days", "in a while", "²"):
        with pytest.raises(UserError, match="--since: expected milliseconds since the") as e:
            parse_time(bad, "--since", now=now)
        assert "'yesterday', '2 days ago' or 'last week'" in str(e.value)


def test_since_not_before_until_is_an_error_naming_both():
    from sqlite_rrf.app import UserError, check_time_range

    with pytest.raises(UserError) as e:
        check_time_range("2026-11-02", "2026-11-01")
    msg = str(e.value)
    assert msg.startswith("--since '2026-11-02' (2026-11-02T00:00:00Z) is not before --until")
    assert "'2026-11-01' (2026-11-01T00:00:00Z)" in msg
    with pytest.raises(UserError, match="is not before"):
        check_time_range("yesterday", "2 days ago")
    assert check_time_range("yesterday", "yesterday", now=1_800_000_000_000) == (
        1_799_884_800_000,
        1_799_971_200_000,
    )


@pytest.mark.parametrize("command", ["recall", "list"])
def test_since_yesterday_on_the_command_line(dated, command):
    extra = ["backups", "--json"] if command == "recall" else ["--json"]
    p = run(command, dated, *extra, "--since", "2 days ago", cwd=dated.parent)
    assert p.returncode == 0, p.stderr
    assert '"fresh"' in p.stdout and '"day1"' in p.stdout
    assert '"day3"' not in p.stdout and '"old"' not in p.stdout
    p = run(
        command, dated, *extra, "--since", "last week", "--until", "2 days ago", cwd=dated.parent
    )
    assert p.returncode == 0, p.stderr
    assert '"day3"' in p.stdout
    assert '"fresh"' not in p.stdout and '"day1"' not in p.stdout and '"old"' not in p.stdout


@pytest.mark.parametrize(
    "command, extra",
    [("recall", ["backups"]), ("list", []), ("forget", [])],
)
def test_since_after_until_is_refused_by_every_command(dated, command, extra):
    before = ids(dated)
    p = run(
        command, dated, *extra, "--since", "yesterday", "--until", "3 days ago", cwd=dated.parent
    )
    assert p.returncode == 1, (p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr
    assert "--since 'yesterday'" in lines[0] and "is not before --until '3 days ago'" in lines[0]
    assert p.stdout == "" and ids(dated) == before


# ---- did you mean ----


def test_a_mistyped_command_gets_did_you_mean(tmp_path):
    p = run("recal", "m.db", "x", cwd=tmp_path)
    assert p.returncode == 2
    assert "invalid choice: 'recal'" in p.stderr and "(did you mean 'recall'?)" in p.stderr


def test_an_unknown_option_is_refused_under_its_command(tmp_path):
    p = run("recall", "m.db", "backups", "--limt", "3", cwd=tmp_path)
    assert p.returncode == 2
    lines = p.stderr.splitlines()
    assert lines[0].startswith("usage: sqlite-rrf recall "), p.stderr
    assert lines[-1] == (
        "sqlite-rrf recall: error: unrecognized arguments: --limt 3 (did you mean '--limit'?)"
    )
    p = run("list", "m.db", "--sinse=yesterday", cwd=tmp_path)
    assert p.returncode == 2 and p.stderr.startswith("usage: sqlite-rrf list ")
    assert "(did you mean '--since'?)" in p.stderr
    p = run("mcp", "m.db", "--scpoe", "shop", cwd=tmp_path)  # mcp's own parser: the same
    assert p.returncode == 2 and p.stderr.startswith("usage: sqlite-rrf mcp ")
    assert "unrecognized arguments: --scpoe shop (did you mean '--scope'?)" in p.stderr
    p = run("add", "m.db", "text", "more text", cwd=tmp_path)  # a second positional
    assert p.returncode == 2 and p.stderr.startswith("usage: sqlite-rrf add ")
    assert "unrecognized arguments: more text" in p.stderr and "did you mean" not in p.stderr
    assert not (tmp_path / "m.db").exists()


def test_a_mistyped_choice_gets_did_you_mean(tmp_path):
    p = run("recall", "m.db", "x", "--pool", "recnt", cwd=tmp_path)
    assert p.returncode == 2 and p.stderr.startswith("usage: sqlite-rrf recall ")
    assert "invalid choice: 'recnt'" in p.stderr and "(did you mean 'recent'?)" in p.stderr


# ---- the scope a server serves ----


def test_server_scope_outside_a_project_is_shared(tmp_path, monkeypatch):
    from sqlite_rrf.app import server_scope

    home = tmp_path / "home" / "alice"
    (home / "notes").mkdir(parents=True)
    shop = home / "code" / "shop"
    (shop / ".git").mkdir(parents=True)
    (shop / "src").mkdir()
    monkeypatch.setenv("HOME", str(home))
    assert server_scope(str(shop / "src")) == "shop"
    assert server_scope(str(home)) == ""
    assert server_scope(str(home / "notes")) == ""  # a plain directory: no project
    assert server_scope("/") == ""
    (home / ".git").mkdir()  # the user's dotfiles repository
    assert server_scope(str(home / "notes")) == ""
    assert server_scope(str(shop)) == "shop"


def test_serve_from_home_serves_the_shared_scope_and_says_so(tmp_path):
    """`sqlite-rrf serve DB` started from $HOME (as a systemd user unit is): its start-up
    line names the scope it serves, the shared one."""
    home = tmp_path / "home"
    home.mkdir()
    db = tmp_path / "agent.db"
    with Store(db):
        pass
    e = dict(os.environ, HOME=str(home), XDG_RUNTIME_DIR="", HF_HUB_OFFLINE="1")
    e["HF_HUB_CACHE"] = str(tmp_path / "empty-hf-cache")
    e.pop("SQLITE_RRF_MODEL", None)
    sock = tmp_path / "s.sock"
    proc = subprocess.Popen(
        [sys.executable, "-m", "sqlite_rrf", "serve", str(db), "--socket", str(sock)],
        cwd=str(home),
        env=e,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            lines.append(line)
            if "ready" in line:
                break
        said = "".join(lines)
        assert "ready" in said, said
        assert "default scope 'shared' (outside a git work tree" in said, said
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        proc.stderr.close()
