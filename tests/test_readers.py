"""Reads never wait, and opening is cheap.

Each case runs the real thing: a second process (the ``sqlite3`` shell, else Python)
holding ``BEGIN IMMEDIATE``; a real full file system (a small tmpfs); a real read-only file
system (a read-only bind mount); another application's SQLite file; the real GGUF model for
the fingerprint cache. The mounts need root (CAP_SYS_ADMIN); where they cannot be made the
test is skipped and says so. Times are printed (``-s`` shows them); the only bound asserted
on them is generous: a recall under a held lock answers in seconds, where it took 31 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import apsw
import pytest

from conftest import embedding_model, needs_model
from sqlite_rrf.store import Store, StoreError

DIM = 4
#: A recall under a held write lock answered in 31 s before (TOUCH_PATIENCE 30 s; the
#: busy timeout 10 s); now in its normal time. The bound only tells the two apart, with
#: room for a machine shared by many processes.
ANSWERS_WITHIN_S = 10.0
SHELL = shutil.which("sqlite3")


def vec(i: int) -> List[float]:
    return [1.0, float(i % 7) - 3.0, 0.5, float(i % 3) - 1.0]


def pvec(i: int) -> List[float]:
    """The vectors of the pending episodes: none of them is any of vec()'s direction."""
    return [-1.0, 2.0, -2.0, 0.7 * i + 0.5]


def make_db(path: Path, n: int = 40, embeddings: bool = True) -> Path:
    """A database made by the Store: ``n`` episodes about vaults and keys."""
    with Store(path) as s:
        s.add_many(
            [
                dict(
                    id=f"e{i}",
                    content=f"episode {i}: the vault key number {i} is kept",
                    embedding=vec(i) if embeddings else None,
                    scope="",
                )
                for i in range(n)
            ]
        )
    return path


def plain(path: Path) -> apsw.Connection:
    """A connection without the rrf extension: its writes leave sign codes pending."""
    c = apsw.Connection(str(path))
    c.set_busy_timeout(10_000)
    return c


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def no_model_env(tmp_path: Path) -> Dict[str, str]:
    """An environment in which no model is loaded (offline, an empty Hugging Face cache)."""
    env = {k: v for k, v in os.environ.items() if k != "SQLITE_RRF_MODEL"}
    cache = tmp_path / "empty-hf-cache"
    cache.mkdir(exist_ok=True)
    env.update(HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(cache), HF_HOME=str(cache))
    return env


def run(
    argv: List[str], env: Dict[str, str], stdin: bytes = b"", timeout: float = 120
) -> Tuple[int, str, str, float]:
    """``python -m sqlite_rrf ARGV``: (status, stdout, stderr, seconds)."""
    t0 = time.monotonic()
    p = subprocess.run(
        [sys.executable, "-m", "sqlite_rrf", *argv],
        input=stdin,
        capture_output=True,
        env=env,
        timeout=timeout,
    )
    return (p.returncode, p.stdout.decode(), p.stderr.decode(), time.monotonic() - t0)


def write_lock_is_held(db: Path) -> bool:
    c = apsw.Connection(str(db))
    try:
        c.set_busy_timeout(0)
        c.execute("BEGIN IMMEDIATE")
        c.execute("ROLLBACK")
        return False
    except apsw.BusyError:
        return True
    finally:
        c.close()


@contextlib.contextmanager
def lock_held(db: Path) -> Iterator[None]:
    """Another process holds the write lock (``BEGIN IMMEDIATE``) until the block ends: the
    sqlite3 shell where there is one, else a Python process."""
    if SHELL:
        cmd = [SHELL, str(db)]
        start, stop = b"BEGIN IMMEDIATE;\n", b"ROLLBACK;\n.quit\n"
    else:
        cmd = [
            sys.executable,
            "-c",
            "import apsw, sys; c = apsw.Connection(sys.argv[1]); "
            "c.execute('BEGIN IMMEDIATE'); sys.stdin.readline()",
            str(db),
        ]
        start, stop = b"", b"\n"
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    try:
        assert p.stdin is not None
        p.stdin.write(start)
        p.stdin.flush()
        deadline = time.monotonic() + 30
        while not write_lock_is_held(db):
            assert time.monotonic() < deadline, "the other process never took the lock"
            assert p.poll() is None, "the process that holds the lock ended"
            time.sleep(0.02)
        yield
    finally:
        with contextlib.suppress(OSError):
            assert p.stdin is not None
            p.stdin.write(stop)
            p.stdin.close()
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def data_version(c: apsw.Connection) -> int:
    """Changes when another connection has committed to the file."""
    return c.execute("PRAGMA data_version").fetchall()[0][0]


def pending_codes(c: apsw.Connection) -> int:
    return c.execute("SELECT count(*) FROM episodes_codes WHERE code IS NULL").fetchall()[0][0]


def add_pending(db: Path, ids: List[str], one_transaction: bool = True) -> None:
    """Episodes written by a client without the extension: their sign codes stay pending.
    Each in its own transaction unless ``one_transaction`` (a full-text segment each)."""
    import numpy as np

    c = plain(db)
    with c if one_transaction else contextlib.nullcontext():
        for i, eid in enumerate(ids):
            c.execute(
                "INSERT INTO episodes(id, content, embedding, created_at, accessed_at) "
                "VALUES (?, ?, ?, 1, 1)",
                (
                    eid,
                    f"a plain client's note {eid} about the vault",
                    np.asarray(pvec(i), "<f4").tobytes(),
                ),
            )
    assert pending_codes(c) == len(ids)
    c.close()


# ---- item 2: opening is cheap ----


def test_opening_a_store_writes_nothing(tmp_path):
    """A Store's open (and a recall without touching) commits nothing, even with codes
    pending and the stopwords never computed: that upkeep is the writer's or `maintain`'s."""
    db = make_db(tmp_path / "m.db")
    add_pending(db, ["p1", "p2", "p3"])
    watch = plain(db)
    watch.execute("DELETE FROM rrf_meta WHERE key LIKE 'bm25_stopwords%'")
    before = data_version(watch)
    with Store(db) as s:
        got = s.recall("vault key", touch=False)
        assert len(got) > 0
    assert data_version(watch) == before, "opening the Store wrote to the file"
    assert pending_codes(watch) == 3


def test_a_store_opens_and_recalls_while_another_process_holds_the_write_lock(tmp_path):
    """With codes pending and another process holding BEGIN IMMEDIATE: the Store opens,
    the pending rows are scored exactly (the one whose vector is the query's is first), the
    touch gives up after TOUCH_PATIENCE and says why, and the recall is intact."""
    db = make_db(tmp_path / "m.db")
    add_pending(db, ["p1", "p2", "p3"])
    query = pvec(1)  # p2's vector
    with lock_held(db):
        t0 = time.monotonic()
        with Store(db) as s:
            opened = time.monotonic() - t0
            got = s.recall("vault", qvec=query, profile="hybrid")
            took = time.monotonic() - t0
            assert got.hits and got.hits[0].id == "p2", [h.id for h in got.hits]
            assert got.touched is False
            assert "write lock" in got.touch_error and "not touched" in got.touch_error
            assert "Error" not in got.touch_error  # no library class in a user's message
            assert pending_codes(s.conn) == 3
        print(f"\nheld lock: Store open {opened * 1000:.0f} ms, open + recall {took * 1000:.0f} ms")
        assert took < ANSWERS_WITHIN_S
    with Store(db) as s:  # the lock is free again: the touch is made
        again = s.recall("vault", qvec=query, profile="hybrid")
        assert again.touched is True and again.touch_error is None
        assert s.get("p2").access_count == 1


def test_touch_later_marks_what_the_recall_returned(tmp_path):
    """recall(touch=False) then Store.touch(result): the hook's order (print, then touch)."""
    db = make_db(tmp_path / "m.db")
    with Store(db) as s:
        got = s.recall("vault key 7", touch=False)
        assert got.touched is False and got.touch_error is None
        assert all(s.get(h.id).access_count == 0 for h in got)
        done = s.touch(got)
        assert done.touched is True and [h.id for h in done] == [h.id for h in got]
        assert all(s.get(h.id).access_count == 1 for h in got)
        assert s.touch(done) is done  # nothing left to touch


# ---- item 3: reads never wait ----


def test_cli_recall_stats_and_hook_answer_under_a_held_lock(tmp_path):
    """`sqlite-rrf recall`, `stats` and `hook` while another process holds the write lock:
    each answers in its normal time (31 s before), the recall says its hits were not
    touched, and nothing was touched."""
    db = make_db(tmp_path / "m.db", embeddings=False)  # no model is loaded for it
    env = no_model_env(tmp_path)
    payload = json.dumps(
        {"session_id": "s1", "prompt": "the vault key number 7", "cwd": str(tmp_path)}
    ).encode()
    with lock_held(db):
        rc, out, err, recall_s = run(["recall", str(db), "vault key", "--limit", "3"], env)
        assert rc == 0, err
        assert out.count("episode ") == 3
        assert "write lock" in err and "not touched" in err
        rc, out, err, stats_s = run(["stats", str(db), "--json"], env)
        assert rc == 0, err
        assert json.loads(out)["episodes"] == 40
        rc, out, err, hook_s = run(["hook", str(db), "--scope", ""], env, stdin=payload)
        assert rc == 0 and "vault key number 7" in out, (out, err)
    print(f"\nheld lock: recall {recall_s:.2f} s, stats {stats_s:.2f} s, hook {hook_s:.2f} s")
    assert max(recall_s, stats_s, hook_s) < ANSWERS_WITHIN_S
    c = plain(db)
    assert c.execute("SELECT sum(access_count) FROM episodes").fetchall() == [(0,)]


def test_the_hook_prints_before_it_touches(tmp_path, monkeypatch):
    """The hook writes its output first and touches after: at the moment its stdout is
    written, the printed episode's access count is still 0 (read by another connection);
    once the hook is done it is 1."""
    import io

    from sqlite_rrf import cli, hook

    db = make_db(tmp_path / "m.db", embeddings=False)
    watch = plain(db)

    def count() -> int:
        return watch.execute("SELECT access_count FROM episodes WHERE id = 'e7'").fetchall()[0][0]

    seen: List[int] = []

    class Stdout(io.StringIO):
        def write(self, text: str) -> int:
            if "vault key number 7" in text:
                seen.append(count())
            return super().write(text)

    payload = json.dumps({"prompt": "the vault key number 7"}).encode()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(payload)))
    out = Stdout()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.delenv("SQLITE_RRF_MODEL", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    args = cli.build_parser().parse_args(["hook", str(db), "--scope", ""])
    assert hook.run(args) == 0
    assert "vault key number 7" in out.getvalue()
    assert seen == [0], f"the access count when the output was written: {seen}"
    assert count() == 1


def test_mcp_under_a_held_lock(tmp_path):
    """MCP: recall answers while another process holds the write lock (its warnings say the
    hits were not touched); remember fails after a bounded wait with a message in the
    product's words, nothing written; after the lock is released both work."""
    pytest.importorskip("mcp")
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    db = make_db(tmp_path / "m.db", embeddings=False)
    env = {
        k: v
        for k, v in no_model_env(tmp_path).items()
        if k in ("HF_HUB_OFFLINE", "HF_HUB_CACHE", "HF_HOME", "PYTHONPATH", "HOME", "PATH")
    }
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "sqlite_rrf", "mcp", str(db), "--scope", ""], env=env
    )
    times: Dict[str, float] = {}

    async def main() -> None:
        with open(tmp_path / "err.txt", "w", encoding="utf-8") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    with lock_held(db):
                        t0 = time.monotonic()
                        res = await session.call_tool("recall", {"query": "the vault key number 7"})
                        times["recall"] = time.monotonic() - t0
                        assert not res.is_error, res.content
                        got = res.structured_content
                        assert got["hits"], got
                        assert any(
                            "write lock" in w and "not touched" in w for w in got["warnings"]
                        ), got["warnings"]
                        t0 = time.monotonic()
                        res = await session.call_tool("remember", {"content": "a new fact"})
                        times["remember"] = time.monotonic() - t0
                        assert res.is_error
                        text = " ".join(c.text for c in res.content)
                        assert "write lock" in text and "nothing was written" in text, text
                        assert "BusyError" not in text
                    res = await session.call_tool("remember", {"content": "a new fact"})
                    assert not res.is_error, res.content

    asyncio.run(main())
    print(
        f"\nheld lock, MCP: recall {times['recall']:.2f} s, remember fails after "
        f"{times['remember']:.2f} s"
    )
    assert times["recall"] < ANSWERS_WITHIN_S and times["remember"] < ANSWERS_WITHIN_S
    with Store(db, readonly=True) as s:
        assert s.count() == 41


# ---- mounts: a full disk, read-only media ----


def _mount(*argv: str) -> bool:
    if shutil.which("mount") is None:
        return False
    return subprocess.run(["mount", *argv], capture_output=True).returncode == 0


def _umount(path: Path) -> None:
    for _ in range(50):
        if subprocess.run(["umount", str(path)], capture_output=True).returncode == 0:
            return
        time.sleep(0.1)


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir()
    if not _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)):
        pytest.skip("cannot mount a tmpfs here (needs root): the full-disk case is not run")
    try:
        yield path
    finally:
        _umount(path)


@contextlib.contextmanager
def read_only_view(src: Path, mnt: Path) -> Iterator[Path]:
    """``src`` bind-mounted read-only at ``mnt``."""
    mnt.mkdir()
    if not _mount("--bind", str(src), str(mnt)):
        pytest.skip("cannot bind-mount here (needs root): the read-only media case is not run")
    try:
        if not _mount("-o", "remount,ro,bind", str(mnt)):
            pytest.skip("cannot remount read-only here: the read-only media case is not run")
        yield mnt
    finally:
        _umount(mnt)


def fill_up(directory: Path) -> Path:
    """Write a file until the file system is full."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0" * 4096)
    finally:
        os.close(fd)
    with pytest.raises(OSError):
        fd = os.open(directory / "one-more", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            os.write(fd, b"\0" * 4096)
        finally:
            os.close(fd)
    return filler


def test_a_full_disk_leaves_the_recall_intact(tmp_path):
    """On a full file system the recall's touch fails (SQLite cannot grow the -wal file):
    the recall returns its hits with touched=False and the reason; the CLI's recall answers
    too, both while another connection has the file open (its -shm exists) and cold (SQLite
    cannot create the -shm on a full disk: the file is opened as immutable, nobody else
    having it open). With room again the touch is made."""
    env = no_model_env(tmp_path)
    payload = json.dumps({"prompt": "the vault key number 7", "cwd": str(tmp_path)}).encode()
    with tmpfs(tmp_path / "small", "1m") as small:
        db = make_db(small / "m.db", n=60)
        keep = plain(db)  # has the file open, as a server would: its -shm exists
        keep.execute("SELECT count(*) FROM episodes").fetchall()
        s = Store(db)
        try:
            filler = fill_up(small)
            got = s.recall("vault key", limit=5)
            assert len(got) == 5
            assert got.touched is False
            assert got.touch_error is not None and "disk is full" in got.touch_error
            rc, out, err, _ = run(["recall", str(db), "vault key", "--limit", "2"], env)
            assert rc == 0, err
            assert out.count("episode ") == 2 and "disk is full" in err
        finally:
            s.close()
            keep.close()
        assert not os.path.exists(str(db) + "-shm") or os.path.getsize(str(db) + "-shm") == 0
        rc, out, err, _ = run(["recall", str(db), "vault key", "--limit", "2"], env)
        assert rc == 0, err
        assert out.count("episode ") == 2 and "disk is full" in err
        rc, out, err, _ = run(["hook", str(db), "--scope", ""], env, stdin=payload)
        assert rc == 0 and "vault key number 7" in out, (out, err)
        filler.unlink()
        with Store(db) as s:
            assert s.opened_as is None
            again = s.recall("vault key", limit=5)
            assert again.touched is True and again.touch_error is None


def test_a_wal_database_on_read_only_media(tmp_path):
    """A WAL database (every database sqlite-rrf makes) on a read-only file system opens
    read-only, as immutable (it has no -wal content): Store(readonly=True), Store(), the
    CLI's recall and stats, and the hook answer; touches are reported, never raised."""
    src = tmp_path / "media"
    src.mkdir()
    make_db(src / "m.db", embeddings=False)
    env = no_model_env(tmp_path)
    payload = json.dumps({"prompt": "the vault key number 7", "cwd": str(tmp_path)}).encode()
    with read_only_view(src, tmp_path / "ro") as ro:
        db = ro / "m.db"
        for readonly in (True, False):
            with Store(db, readonly=readonly) as s:
                assert s.readonly is True
                assert s.opened_as is not None and "immutable" in s.opened_as
                got = s.recall("vault key", limit=3)
                assert len(got) == 3 and got.touched is False and "read-only" in got.touch_error
                with pytest.raises(StoreError, match="read-only"):
                    s.add("x")
        rc, out, err, _ = run(["recall", str(db), "vault key", "--limit", "3"], env)
        assert rc == 0 and out.count("episode ") == 3, err
        rc, out, err, _ = run(["stats", str(db), "--json"], env)
        assert rc == 0 and json.loads(out)["episodes"] == 40, err
        rc, out, err, _ = run(["hook", str(db), "--scope", ""], env, stdin=payload)
        assert rc == 0 and "vault key number 7" in out, (out, err)
        if mcp_sdk():
            got = mcp_recall(db, "the vault key number 7", env, tmp_path)
            assert any(h["id"] == "e7" for h in got["hits"]), got
            assert any("read-only" in w for w in got["warnings"]), got["warnings"]


def mcp_sdk() -> bool:
    try:
        import mcp  # noqa: F401
    except ImportError:
        return False
    return True


def mcp_recall(db: Path, query: str, env: Dict[str, str], tmp_path: Path) -> Dict[str, Any]:
    """One MCP recall from a fresh `sqlite-rrf mcp DB` server, through the SDK's client."""
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "sqlite_rrf", "mcp", str(db), "--scope", ""],
        env={
            k: v
            for k, v in env.items()
            if k in ("HF_HUB_OFFLINE", "HF_HUB_CACHE", "HF_HOME", "PYTHONPATH", "HOME", "PATH")
        },
    )

    async def main() -> Dict[str, Any]:
        with open(tmp_path / "mcp-err.txt", "a", encoding="utf-8") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    res = await session.call_tool("recall", {"query": query})
                    assert not res.is_error, res.content
                    return res.structured_content

    return asyncio.run(main())


def test_a_wal_with_content_on_read_only_media_is_read_whole(tmp_path):
    """immutable=1 would not read a -wal file: when the -wal has content (a writer has not
    checkpointed) the file is opened read-only as SQLite opens it (its -shm exists), and the
    latest write is seen."""
    src = tmp_path / "media"
    src.mkdir()
    db_src = make_db(src / "m.db")
    writer = plain(db_src)
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    writer.execute("UPDATE episodes SET content = 'rewritten in the wal' WHERE id = 'e3'")
    assert os.path.getsize(str(db_src) + "-wal") > 0
    with read_only_view(src, tmp_path / "ro") as ro:
        try:
            with Store(ro / "m.db", readonly=True) as s:
                assert s.opened_as is None
                assert s.get("e3").content == "rewritten in the wal"
        finally:
            # SQLite keeps the reader's file open while this process's writer holds locks
            # on the same file: close the writer before the mount goes
            writer.close()


# ---- another application's file ----

FOREIGN = {
    "its own episodes table": [
        "CREATE TABLE episodes(id INTEGER PRIMARY KEY, title TEXT, aired TEXT)",
        "INSERT INTO episodes(title, aired) VALUES ('Pilot', '2001-01-01'), ('Two', '2001-01-08')",
    ],
    "no episodes table": [
        "CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT)",
        "INSERT INTO notes(body) VALUES ('buy milk')",
    ],
    "a schema_migrations table of its own": [
        "CREATE TABLE schema_migrations(version TEXT PRIMARY KEY)",
        "INSERT INTO schema_migrations VALUES ('20240101000000')",
        "CREATE TABLE episodes(id INTEGER PRIMARY KEY, content TEXT)",
    ],
}


@pytest.mark.parametrize("kind", sorted(FOREIGN))
def test_another_applications_file_is_refused_unchanged(tmp_path, kind):
    """`recall`, `stats`, the hook, Store(readonly=True) and Store() refuse another
    application's SQLite file (rollback journal) with a clear message, and its bytes and its
    journal mode are as they were: nothing is written to it, not even the WAL switch."""
    db = tmp_path / "app.db"
    c = apsw.Connection(str(db))
    c.execute("PRAGMA journal_mode = DELETE")
    for sql in FOREIGN[kind]:
        c.execute(sql)
    c.close()
    before = digest(db)
    env = no_model_env(tmp_path)
    for argv in (["recall", str(db), "pilot"], ["stats", str(db)]):
        rc, out, err, _ = run(argv, env)
        assert rc == 1 and "is not a sqlite-rrf database" in err, (argv, err)
        assert "nothing was written" in err and "Error" not in err
    rc, out, err, _ = run(["hook", str(db)], env, stdin=b'{"prompt": "pilot"}')
    assert rc == 0 and out == "" and "is not a sqlite-rrf database" in err, err
    for readonly in (True, False):
        with pytest.raises(StoreError, match="is not a sqlite-rrf database"):
            Store(db, readonly=readonly)
    assert digest(db) == before
    assert not os.path.exists(str(db) + "-wal")
    c = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    assert c.execute("PRAGMA journal_mode").fetchall() == [("delete",)]


# ---- maintenance: `sqlite-rrf maintain` ----


def test_maintain_does_the_upkeep_an_open_leaves(tmp_path):
    """Codes left pending by another client, loose codes due a block, segments of the
    full-text index written one statement at a time: a reader's open leaves them; `sqlite-rrf
    maintain` computes the codes, packs them, merges the index; a second run finds nothing."""
    db = make_db(tmp_path / "m.db", n=10)
    add_pending(db, [f"p{i}" for i in range(300)], one_transaction=False)
    with Store(db) as s:
        assert pending_codes(s.conn) == 300
        assert s.recall("plain client's note", limit=3).hits
        assert pending_codes(s.conn) == 300
    env = no_model_env(tmp_path)
    rc, out, err, _ = run(["maintain", str(db), "--json"], env)
    assert rc == 0, err
    done = json.loads(out)
    assert done["codes_filled"] == 300
    assert done["codes_packed"] == 256  # one block of Store.CODE_BLOCK; the rest stay loose
    assert done["fts_merges"] >= 1
    c = plain(db)
    assert pending_codes(c) == 0
    assert c.execute("SELECT count(*) FROM episodes_code_blocks").fetchall() == [(1,)]
    rc, out, err, _ = run(["maintain", str(db)], env)
    assert rc == 0 and "0 pending codes computed, 0 codes packed" in out, (out, err)
    assert "0 full-text index merges" in out


def test_maintain_refuses_what_it_cannot_do(tmp_path):
    """No such file, another application's file: one line each, nothing created or
    written."""
    env = no_model_env(tmp_path)
    rc, out, err, _ = run(["maintain", str(tmp_path / "none.db")], env)
    assert rc == 1 and "no such database" in err
    assert not (tmp_path / "none.db").exists()
    app = tmp_path / "app.db"
    c = apsw.Connection(str(app))
    c.execute("CREATE TABLE notes(body TEXT)")
    c.close()
    before = digest(app)
    rc, out, err, _ = run(["maintain", str(app)], env)
    assert rc == 1 and "is not a sqlite-rrf database" in err, err
    assert digest(app) == before


# ---- the model's fingerprint, once per model file ----


@needs_model
def test_the_fingerprint_is_embedded_once_per_model_file(tmp_path, monkeypatch):
    """Opening a database with a model embeds the fingerprint texts once per model file
    (path, size, mtime): a second open reads the cache. Shown by poisoning the cached value:
    the open then refuses the model; once the file changes (its mtime), the fingerprint is
    embedded again and the open succeeds."""
    from sqlite_rrf.embedding.embedder import Embedder, fingerprint_cache_path

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    model = tmp_path / "model.gguf"
    shutil.copyfile(str(embedding_model()), model)
    db = tmp_path / "m.db"
    times = {}
    with Embedder(str(model)) as emb:
        t0 = time.monotonic()
        Store(db, embedder=emb).close()  # records the fingerprint; caches it
        times["first"] = time.monotonic() - t0
        t0 = time.monotonic()
        Store(db, embedder=emb).close()
        times["cached"] = time.monotonic() - t0
    cache = json.loads(Path(fingerprint_cache_path()).read_text())
    assert len(cache) == 1
    key = next(iter(cache))
    assert key.startswith(str(model.resolve()) + "|")
    import numpy as np

    fp = np.frombuffer(bytes.fromhex(cache[key]), "<f4")
    cache[key] = (-fp).astype("<f4").tobytes().hex()  # another model's, as far as it says
    Path(fingerprint_cache_path()).write_text(json.dumps(cache))
    with Embedder(str(model)) as emb:
        with pytest.raises(StoreError, match="not the model"):
            Store(db, embedder=emb)
    st = model.stat()
    os.utime(model, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    with Embedder(str(model)) as emb:
        Store(db, embedder=emb).close()  # the file changed: embedded again, and it matches
    cache = json.loads(Path(fingerprint_cache_path()).read_text())
    (new,) = set(cache) - {key}
    assert new.startswith(str(model.resolve()) + "|")
    assert np.allclose(np.frombuffer(bytes.fromhex(cache[new]), "<f4"), fp, atol=1e-5)
    print(
        f"\nStore open with a model: {times['first'] * 1000:.0f} ms embedding the "
        f"fingerprint, {times['cached'] * 1000:.0f} ms from the cache"
    )


def test_a_write_that_committed_never_raises_from_the_upkeep_after_it(tmp_path):
    """The writer's upkeep after its commit (pending codes another client left, stopwords)
    is best effort: an interrupt meant for the write that lands in it, or any other
    failure there, must not make a committed write raise (the soak's "versions from
    operations that raised are visible")."""
    db = make_db(tmp_path / "m.db")
    add_pending(db, [f"p{i}" for i in range(5)])  # the upkeep has codes to fill
    with Store(db) as s:
        s.fill_keys()  # the other client's content keys: the next commit is the write's
        state = {"committed": False, "interrupting": False, "interrupted": 0}

        def tracer(cursor: Any, sql: str, bindings: Any) -> bool:
            # every statement that starts after the write's COMMIT is the upkeep's
            if state["committed"]:
                state["interrupting"] = True
            if sql.strip().upper() == "COMMIT":
                state["committed"] = True
            return True

        def progress() -> int:
            if state["interrupting"]:
                state["interrupted"] += 1
                return 1
            return 0

        s.conn.exec_trace = tracer
        s.conn.set_progress_handler(progress, 1)
        try:
            new_id = s.add("a note written while the upkeep is interrupted", embedding=vec(99))
        finally:
            s.conn.set_progress_handler(None)
            s.conn.exec_trace = None
        assert state["interrupted"]  # the upkeep ran and was interrupted
        assert s.get(new_id) is not None
    c = plain(db)
    assert pending_codes(c) >= 5  # left for later: pending, scored exactly
    c.close()


def test_delete_waits_for_the_lock_like_every_write(tmp_path):
    """delete() begins with the write lock (BEGIN IMMEDIATE), so a writer that held the
    lock a moment ago delays it instead of making it fail at once; on read-only media it
    says nothing was deleted."""
    db = make_db(tmp_path / "m.db")
    with Store(db) as s:
        seen: List[str] = []
        s.conn.exec_trace = lambda cursor, sql, bindings: seen.append(sql.strip()) or True
        assert s.delete("e1") is True
        s.conn.exec_trace = None
        assert seen[0].upper() == "BEGIN IMMEDIATE", seen[:3]
        assert s.delete("e1") is False
