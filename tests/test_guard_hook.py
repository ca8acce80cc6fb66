"""The hook and its socket under hostile input: an output bound that counts every field (a
7,000-character id hides no memory), deeply nested JSON on the socket and a lone
surrogate in the payload's cwd said in the product's words, idle connections timed out
and capped, and a stale socket of another user beside the database."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from tests.test_server import _default_socket, env_for, make_db, ping, serving

from sqlite_rrf.app.prompt_recall import DEFAULT_MAX_TOTAL, render
from sqlite_rrf.serve.settings import HOOK_IO_TIMEOUT, MAX_HOOK_CONNECTIONS

SQLITE3 = "/usr/bin/sqlite3"


def hit(i: int, content: str, eid: str) -> SimpleNamespace:
    return SimpleNamespace(
        id=eid, content=content, importance="normal", created_at=0, duplicates=0, rank=i
    )


# ---- the output bound counts every field ----


@pytest.mark.parametrize("max_total", [300, 1000, DEFAULT_MAX_TOTAL])
def test_render_counts_every_field_and_a_long_id_hides_nothing(max_total):
    hits = [
        hit(0, "the first note", "x" * 7000),
        hit(1, "the relevant note about postgres credentials", "relevant"),
        hit(2, "y" * 3000, "long-text"),
        hit(3, "a short last note", "last"),
    ]
    out = render(hits, ["shop", ""], 400, now_ms=0, max_total=max_total)
    assert len(out) <= max_total
    assert "relevant" in out and "the relevant note about postgres" in out
    assert "x" * 300 not in out  # the id is shown cut
    # a scope name counts too
    out = render(hits, "s" * 5000, 400, now_ms=0, max_total=max_total)
    assert len(out) <= max_total and "relevant" in out


def test_render_leaves_out_what_does_not_fit_and_says_how_many():
    hits = [hit(i, f"note number {i} " + "z" * 150, f"id-{i}") for i in range(10)]
    out = render(hits, None, 400, now_ms=0, max_total=700)
    assert len(out) <= 700
    shown = sum(1 for ln in out.splitlines() if ln.startswith("- "))
    assert 1 <= shown < 10
    assert out.splitlines()[-1] == f"({10 - shown} more not shown: the hook's --max-total)"


@pytest.mark.skipif(not os.path.exists(SQLITE3), reason="needs /usr/bin/sqlite3")
def test_the_hook_shows_the_relevant_memory_beside_a_7000_character_id(tmp_path):
    db = tmp_path / "m.db"
    make_db(db)
    long_id = "i" * 7000
    r = subprocess.run(
        [SQLITE3, str(db)],
        input="INSERT INTO episodes(id, content, scope, importance) VALUES "
        f"('{long_id}', 'The shop''s Postgres credentials are kept in Vault, ask the shop "
        "team.', 'shop', 'high');",
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    env = env_for(tmp_path)
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "sqlite_rrf",
            "hook",
            str(db),
            "--scope",
            "shop",
            "--min-relevance",
            "0",
            "--no-server",
        ],
        input=json.dumps({"prompt": "where are the postgres credentials kept?"}),
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert p.returncode == 0 and "sqlite-rrf hook:" not in p.stderr, p.stderr
    assert len(p.stdout) <= DEFAULT_MAX_TOTAL
    lines = p.stdout.splitlines()
    assert "i" * 100 in lines[1]  # the long id's hit ranks first, its id shown cut
    assert any("Vault at secret/shop/postgres" in ln and "shop-db" in ln for ln in lines[2:])


# ---- hostile requests in the product's words ----


def test_deeply_nested_json_on_the_socket_is_refused_in_words(tmp_path):
    db = make_db(tmp_path / "m.db")
    env = env_for(tmp_path)
    with serving(db, env):
        path = _default_socket(db, env)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(30)
        s.connect(path)
        s.sendall(b"[" * 100_000 + b"]" * 100_000 + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        s.close()
        answer = json.loads(data)
        assert answer["ok"] is False
        assert answer["error"].startswith("request is nested too deeply"), answer
        assert "RecursionError" not in answer["error"] and "report" not in answer["error"]
        assert ping(path) is not None  # still serving


def test_a_lone_surrogate_in_the_cwd_is_said_in_words(tmp_path):
    db = make_db(tmp_path / "m.db")
    env = env_for(tmp_path)
    p = subprocess.run(
        [sys.executable, "-m", "sqlite_rrf", "hook", str(db), "--no-server"],
        input='{"prompt": "where are the postgres credentials kept?", "cwd": "/tmp/a\\ud800b"}',
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert p.returncode == 0 and p.stdout == ""
    assert p.stderr.startswith('sqlite-rrf hook: stdin: "cwd" holds a lone surrogate'), p.stderr
    assert "\\ud800 at character 6" in p.stderr
    assert "codec" not in p.stderr and "surrogates not allowed" not in p.stderr


# ---- idle connections: a time-out and a cap ----


def _threads(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    raise AssertionError("no Threads line")


def test_idle_connections_are_capped_and_timed_out(tmp_path):
    db = make_db(tmp_path / "m.db")
    env = env_for(tmp_path)
    with serving(db, env) as proc:
        path = _default_socket(db, env)
        base = _threads(proc.pid)
        idle = []
        for _ in range(MAX_HOOK_CONNECTIONS + 40):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(path)
            idle.append(s)
        time.sleep(1.0)
        assert _threads(proc.pid) <= base + MAX_HOOK_CONNECTIONS + 1
        # past the time-out every idle connection is closed by the server
        time.sleep(HOOK_IO_TIMEOUT + 2)
        for s in idle:
            s.settimeout(5)
            with contextlib.suppress(ConnectionResetError):
                assert s.recv(1) == b""
            s.close()
        time.sleep(0.5)
        assert _threads(proc.pid) <= base + 1
        assert ping(path) is not None


# ---- a stale socket of another user beside the database ----

PLANTER, VICTIM = 65533, 65534
#: Another user cannot run this environment's interpreter when it lives in root's home:
#: they run the system's Python of the same version, with the package and the
#: environment's libraries on PYTHONPATH.
SYSTEM_PY = "/usr/bin/python3"
needs_root = pytest.mark.skipif(
    os.getuid() != 0
    or not os.path.exists(SYSTEM_PY)
    or subprocess.run(
        [SYSTEM_PY, "-c", f"import sys; sys.exit(sys.version_info[:2] != {sys.version_info[:2]})"]
    ).returncode
    != 0,
    reason="needs root (to act as two users) and a system Python of this version",
)


def _as(uid: int):
    def become() -> None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)

    return become


@contextlib.contextmanager
def _shared_dir():
    d = Path(tempfile.mkdtemp(prefix="rrf-shared-"))
    os.chmod(d, 0o1777)  # a shared sticky directory, as /tmp
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _victim_env(d: Path) -> dict:
    home = d / "home"
    home.mkdir()
    os.chown(home, VICTIM, VICTIM)
    env = env_for(d / "home")
    env.pop("XDG_RUNTIME_DIR", None)
    cache = d / "home" / "empty-hf-cache"
    os.chown(cache, VICTIM, VICTIM)
    os.chown(d / "home" / "run", VICTIM, VICTIM)
    import sysconfig

    import sqlite_rrf

    pysrc = os.path.dirname(os.path.dirname(sqlite_rrf.__file__))
    env.update(
        HOME=str(home),
        TMPDIR=str(d / "home"),
        PYTHONPATH=os.pathsep.join([pysrc, sysconfig.get_paths()["purelib"]]),
    )
    return env


def _plant(path: Path) -> None:
    """Another user binds a socket at ``path`` and goes away (it stays, stale)."""
    code = "import socket, sys; s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.close()"
    subprocess.run([SYSTEM_PY, "-c", code, str(path)], preexec_fn=_as(PLANTER), check=True)


@needs_root
def test_an_explicit_socket_of_another_user_is_said_for_what_it_is(tmp_path):
    with _shared_dir() as d:
        db = make_db(d / "m.db")
        os.chown(db, VICTIM, VICTIM)
        planted = d / "planted.sock"
        _plant(planted)
        env = _victim_env(d)
        p = subprocess.run(
            [SYSTEM_PY, "-m", "sqlite_rrf", "serve", str(db), "--socket", str(planted)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            preexec_fn=_as(VICTIM),
        )
        assert p.returncode != 0
        assert f"is a socket of another user (uid {PLANTER})" in p.stderr, p.stderr
        assert "already listens" not in p.stderr


@needs_root
def test_a_planted_db_sock_makes_serve_and_the_hook_use_a_private_directory(tmp_path):
    with _shared_dir() as d:
        db = make_db(d / "m.db")
        os.chown(db, VICTIM, VICTIM)
        _plant(Path(str(db) + ".sock"))
        env = _victim_env(d)
        proc = subprocess.Popen(
            [SYSTEM_PY, "-m", "sqlite_rrf", "serve", str(db)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=_as(VICTIM),
        )
        try:
            private = d / "home" / f"sqlite-rrf-{VICTIM}"  # $TMPDIR is d/home
            deadline = time.time() + 60
            while not (private.exists() and any(private.glob("*.sock"))):
                assert proc.poll() is None, proc.communicate()[1].decode()
                assert time.time() < deadline, "no socket in the private directory"
                time.sleep(0.2)
            assert oct(private.stat().st_mode & 0o777) == "0o700"
            p = subprocess.run(
                [
                    SYSTEM_PY,
                    "-m",
                    "sqlite_rrf",
                    "hook",
                    str(db),
                    "--scope",
                    "shop",
                    "--min-relevance",
                    "0",
                ],
                input=json.dumps({"prompt": "where are the postgres credentials kept?"}),
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
                preexec_fn=_as(VICTIM),
            )
            assert p.returncode == 0 and "Vault" in p.stdout, p.stderr
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=60)
