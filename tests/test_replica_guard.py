"""What replication may write over, with the real Litestream: a refreshed read replica
under a long-lived reader (``serve`` on the copy across refreshes), ``restore --refresh
-o FILE`` over an existing file, and ``replicate --config PATH`` over the database, its
-wal/-shm (through links) or a file it did not write."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

import apsw
import pytest

from sqlite_rrf.app import UserError, replicate
from sqlite_rrf.store import Store

try:
    replicate.litestream_path()
    HAVE_LITESTREAM = True
except UserError:
    HAVE_LITESTREAM = False
pytestmark = pytest.mark.skipif(
    not HAVE_LITESTREAM, reason="needs litestream: pip install 'sqlite-rrf[replicate]'"
)

WORDS = "alpha beta gamma delta postgres backup token cache".split()


def env_for(tmp_path: Path) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "SQLITE_RRF_MODEL"}
    cache = tmp_path / "empty-hf-cache"
    cache.mkdir(exist_ok=True)
    run = tmp_path / "run"
    run.mkdir(exist_ok=True, mode=0o700)
    env.update(
        HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(cache), HF_HOME=str(cache), XDG_RUNTIME_DIR=str(run)
    )
    return env


def memory(path: Path, n: int, prefix: str = "e") -> None:
    with Store(path) as s:
        s.add_many(
            [
                dict(id=f"{prefix}{i}", content=f"postgres backup note {prefix}{i} {WORDS[i % 8]}")
                for i in range(n)
            ],
            dedupe=False,
        )


def cli(env: Dict[str, str], *argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sqlite_rrf", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def once(env: Dict[str, str], db: Path, replica: Path) -> None:
    r = cli(env, "replicate", str(db), "--to", str(replica), "--once")
    assert r.returncode == 0, r.stdout + r.stderr


def integrity(path: Path) -> List[str]:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return [r[0] for r in conn.execute("PRAGMA integrity_check")]
    finally:
        conn.close()


def ids(path: Path) -> set:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return {i for (i,) in conn.execute("SELECT id FROM episodes")}
    finally:
        conn.close()


def quiet() -> object:
    return open(os.devnull, "w")


# ---- a refreshed copy under a long-lived reader ----


def test_serve_on_a_refreshed_copy_across_five_refreshes(tmp_path):
    from sqlite_rrf.hook import ask_server

    env = env_for(tmp_path)
    db, replica, copy = tmp_path / "m.db", tmp_path / "rep", tmp_path / "copy.db"
    memory(db, 20)
    once(env, db, replica)
    replicate.refresh(str(replica), str(copy), interval="1s", rounds=1, out=quiet())
    server = subprocess.Popen(
        [sys.executable, "-m", "sqlite_rrf", "serve", str(copy)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        old = os.environ.get("XDG_RUNTIME_DIR")
        os.environ["XDG_RUNTIME_DIR"] = env["XDG_RUNTIME_DIR"]
        from sqlite_rrf.app import socket_path

        sock = socket_path(str(copy))
        if old is None:
            del os.environ["XDG_RUNTIME_DIR"]
        else:
            os.environ["XDG_RUNTIME_DIR"] = old
        deadline = time.time() + 60
        while ask_server(sock, {"v": 1, "op": "ping"}, timeout=2) is None:
            assert server.poll() is None, server.communicate()[1].decode()
            assert time.time() < deadline
            time.sleep(0.1)
        req = {
            "v": 1,
            "op": "hook",
            "db": os.path.realpath(copy),
            "prompt": "postgres backup note",
            "limit": 5,
            "max_chars": 400,
            "max_total": 6000,
            "min_relevance": 0,
            "topic_gate": False,
            "format": "markdown",
            "scope": None,
            "session": None,
        }
        for round_ in range(5):
            answer = ask_server(sock, req, timeout=30)
            assert answer is not None and answer.get("ok") is True, answer
            assert "postgres backup note" in answer["text"]
            memory(db, 3, prefix=f"r{round_}-")  # a change on the primary
            once(env, db, replica)
            replicate.refresh(str(replica), str(copy), interval="1s", rounds=1, out=quiet())
            # a new reader of the copy: whole, and it has the primary's change
            assert integrity(copy) == ["ok"]
            assert {f"r{round_}-{i}" for i in range(3)} <= ids(copy)
            r = cli(env, "recall", str(copy), "postgres backup", "--json", "--scope", "*")
            assert r.returncode == 0 and "malformed" not in r.stderr, r.stderr
            r = cli(env, "stats", str(copy), "--json")
            assert r.returncode == 0, r.stderr
            assert json.loads(r.stdout)
            # a refresh never leaves a -wal/-shm that belongs to another file
            assert not (tmp_path / "copy.db-wal").exists()
            assert not (tmp_path / "copy.db-shm").exists()
        answer = ask_server(sock, req, timeout=30)
        assert answer is not None and answer.get("ok") is True, answer
    finally:
        server.send_signal(signal.SIGTERM)
        _, err = server.communicate(timeout=60)
    assert "malformed" not in err.decode()
    assert integrity(copy) == ["ok"]
    assert ids(copy) == ids(db)


def test_a_stale_wal_beside_the_copy_is_moved_aside_by_the_next_refresh(tmp_path):
    """Another client (the sqlite3 shell) switched the copy to WAL and left its -wal: the
    refresh moves it aside with the old file, and the new copy reads whole."""
    env = env_for(tmp_path)
    db, replica, copy = tmp_path / "m.db", tmp_path / "rep", tmp_path / "copy.db"
    memory(db, 10)
    once(env, db, replica)
    replicate.refresh(str(replica), str(copy), interval="1s", rounds=1, out=quiet())
    other = apsw.Connection(str(copy))  # another client, writing the copy in WAL mode
    other.execute("PRAGMA journal_mode = WAL")
    other.execute("PRAGMA wal_autocheckpoint = 0")
    other.execute("UPDATE episodes SET content = content || ' local edit'")
    assert (tmp_path / "copy.db-wal").stat().st_size > 0
    memory(db, 3, prefix="later-")
    once(env, db, replica)
    replicate.refresh(str(replica), str(copy), interval="1s", rounds=1, out=quiet())
    assert not (tmp_path / "copy.db-wal").exists()
    assert integrity(copy) == ["ok"]
    assert {"later-0", "later-1", "later-2"} <= ids(copy)
    other.close()  # its checkpoint goes into the old file it has open, not the new copy
    assert integrity(copy) == ["ok"]
    assert {"later-0", "later-1", "later-2"} <= ids(copy)
    with Store(copy) as s:
        assert s.readonly and s.opened_as and "restore --refresh" in s.opened_as
        assert s.conn.execute("PRAGMA journal_mode").fetchall() == [("delete",)]
    assert not (tmp_path / "copy.db-wal").exists()


# ---- restore --refresh -o FILE over an existing file ----


def test_refresh_never_replaces_a_file_it_did_not_make(tmp_path):
    env = env_for(tmp_path)
    db, replica, live = tmp_path / "m.db", tmp_path / "rep", tmp_path / "live.db"
    memory(db, 1)
    once(env, db, replica)
    memory(live, 50, prefix="live-")
    before = live.read_bytes()
    r = cli(env, "restore", "--from", str(replica), "-o", str(live), "--refresh", "1s", timeout=60)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "live.db exists and was not written by this command" in r.stderr
    assert "--force" in r.stderr and "Error" not in r.stderr
    assert live.read_bytes() == before and len(ids(live)) == 50
    with pytest.raises(UserError, match="not written by this command"):
        replicate.refresh(str(replica), str(live), interval="1s", rounds=1, out=quiet())
    assert len(ids(live)) == 50
    # its own earlier restore is replaced without --force; another replica's is not
    copy = tmp_path / "copy.db"
    replicate.refresh(str(replica), str(copy), interval="1s", rounds=1, out=quiet())
    replicate.refresh(str(replica), str(copy), interval="1s", rounds=1, out=quiet())
    assert ids(copy) == ids(db)
    other = tmp_path / "rep2"
    once(env, db, other)
    with pytest.raises(UserError, match="not written by this command"):
        replicate.refresh(str(other), str(copy), interval="1s", rounds=1, out=quiet())
    # --force replaces it (the first time; then it is its own)
    replicate.refresh(str(replica), str(live), interval="1s", rounds=1, out=quiet(), force=True)
    assert ids(live) == ids(db)
    r = cli(env, "restore", "--from", str(replica), "-o", str(tmp_path / "x.db"), "--force")
    assert r.returncode == 1 and "--force: only with --refresh" in r.stderr


# ---- replicate --config PATH ----


def test_replicate_config_never_overwrites_the_database_or_a_foreign_file(tmp_path):
    env = env_for(tmp_path)
    db, rep = tmp_path / "m.db", str(tmp_path / "rep")
    memory(db, 5)
    with Store(db) as s:  # the database open in WAL mode by a writer: its -wal and -shm exist
        s.add("one more", id="more")
        (tmp_path / "sym.db").symlink_to(db)
        os.link(db, tmp_path / "hard.db")
        before = db.read_bytes()
        for target in ("m.db", "m.db-wal", "m.db-shm", "sym.db", "hard.db"):
            r = cli(
                env,
                "replicate",
                str(db),
                "--to",
                rep,
                "--config",
                str(tmp_path / target),
                "--check",
                "--force",
            )
            assert r.returncode == 1, (target, r.stdout + r.stderr)
            assert "is the database" in r.stderr, (target, r.stderr)
        assert db.read_bytes() == before
        assert integrity(db) == ["ok"]
    # a hand-written configuration: refused without --force, replaced with it
    mine = tmp_path / "litestream.yml"
    mine.write_text("dbs:\n  - path: /elsewhere.db\n")
    r = cli(env, "replicate", str(db), "--to", rep, "--config", str(mine), "--check")
    assert r.returncode == 1 and "was not written by this command" in r.stderr, r.stderr
    assert mine.read_text() == "dbs:\n  - path: /elsewhere.db\n"
    r = cli(env, "replicate", str(db), "--to", rep, "--config", str(mine), "--check", "--force")
    assert r.returncode == 0, r.stderr
    assert mine.read_text().startswith(replicate.CONFIG_MARK)
    # its own configuration is written again without --force (the default path too)
    for argv in (["--config", str(mine)], []):
        r = cli(env, "replicate", str(db), "--to", rep, *argv, "--check")
        assert r.returncode == 0, r.stderr
    # written whole: no temporary file left beside it
    assert sorted(p.name for p in tmp_path.iterdir() if ".tmp" in p.name) == []


def test_check_reads_a_refreshed_copy_and_repairs_only_the_primary(tmp_path):
    env = env_for(tmp_path)
    db, replica, copy = tmp_path / "m.db", tmp_path / "rep", tmp_path / "copy.db"
    memory(db, 5)
    once(env, db, replica)
    replicate.refresh(str(replica), str(copy), interval="1s", rounds=1, out=quiet())
    before = copy.read_bytes()
    r = cli(env, "check", str(copy))
    assert r.returncode == 0, r.stdout + r.stderr
    r = cli(env, "check", str(copy), "--repair")
    assert r.returncode == 1 and "repair the primary" in r.stderr, r.stdout + r.stderr
    assert copy.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("copy")) == ["copy.db"]
