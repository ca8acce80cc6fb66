"""One row whose TEXT is not valid UTF-8, written by another client (the sqlite3 shell's
``CAST(x'…e9' AS TEXT)``): every read of the product shows it with U+FFFD for each
invalid byte sequence instead of failing (the command line, the hook, MCP through the
SDK's client, Datasette), ``check`` names it and ``check --repair`` rewrites it so."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest

from sqlite_rrf.store import Store

SQLITE3 = "/usr/bin/sqlite3"
BAD = "4f6c64206e6f74653a2063616670e9"  # "Old note: cafp" and a Latin-1 é (0xE9)
SHOWN = "Old note: cafp\ufffd"

needs_shell = pytest.mark.skipif(not os.path.exists(SQLITE3), reason="needs /usr/bin/sqlite3")


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


def shell(db: Path, sql: str) -> None:
    r = subprocess.run([SQLITE3, str(db)], input=sql, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and not r.stderr, r.stderr


def make_db(tmp_path: Path, *, in_id: bool = False) -> Path:
    """A memory of two good notes, and one whose content (and, with ``in_id``, id, kind
    and scope) is not valid UTF-8, inserted through the sqlite3 shell."""
    db = tmp_path / "m.db"
    with Store(db) as s:
        s.add("Old note: the cafe opens at nine", id="good-1", scope="shop")
        s.add("A note about the cafe menu and prices", id="good-2", scope="shop")
    bad = f"CAST(x'{BAD}' AS TEXT)"
    shell(
        db,
        "INSERT INTO episodes(id, content, scope, kind) VALUES ("
        + (
            f"{bad}, {bad}, CAST(x'73686f70ff' AS TEXT), CAST(x'6e6f7465c3' AS TEXT)"
            if in_id
            else f"'bad-1', {bad}, 'shop', NULL"
        )
        + ");",
    )
    return db


def cli(env: Dict[str, str], *argv: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sqlite_rrf", *argv],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


@needs_shell
@pytest.mark.parametrize("in_id", [False, True], ids=["content", "id-scope-kind"])
def test_the_command_line_reads_the_row_with_replacement(tmp_path, in_id):
    db = make_db(tmp_path, in_id=in_id)
    env = env_for(tmp_path)
    r = cli(env, "list", str(db), "--json", "--scope", "*")
    assert r.returncode == 0, r.stderr
    assert SHOWN in r.stdout and "UnicodeDecodeError" not in r.stderr
    r = cli(env, "recall", str(db), "old note cafp", "--json", "--scope", "*", "--no-touch")
    assert r.returncode == 0, r.stderr
    assert SHOWN in r.stdout
    r = cli(env, "stats", str(db), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)
    r = cli(env, "export", str(db))
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert len(lines) == 3 and any(x["content"] == SHOWN for x in lines)


@needs_shell
def test_export_keeps_the_row_and_its_bytes(tmp_path):
    import base64

    db = make_db(tmp_path)
    r = cli(env_for(tmp_path), "export", str(db))
    (row,) = [json.loads(x) for x in r.stdout.splitlines() if "bad-1" in x]
    assert base64.b64decode(row["invalid_utf8"]["content"]) == bytes.fromhex(BAD)


@needs_shell
def test_check_names_the_row_and_repair_rewrites_it(tmp_path):
    db = make_db(tmp_path, in_id=True)
    env = env_for(tmp_path)
    r = cli(env, "check", str(db))
    assert r.returncode != 0, r.stdout
    assert "not valid UTF-8 in content, id, kind, scope" in r.stdout + r.stderr
    assert "rowid 3" in r.stdout + r.stderr
    r = cli(env, "check", str(db), "--repair")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "rewrote the text of 1 episode" in r.stdout + r.stderr
    r = cli(env, "check", str(db))
    assert r.returncode == 0, r.stdout + r.stderr
    # the bytes are now valid UTF-8, read by a client without the product's cursor
    import sqlite3

    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT id, content, scope, kind FROM episodes WHERE rowid = 3").fetchall()
    conn.close()
    assert rows == [(SHOWN, SHOWN, "shop\ufffd", "note\ufffd")]
    # the full-text index follows the new text
    r = cli(env, "recall", str(db), "cafp", "--json", "--scope", "*", "--no-touch")
    assert SHOWN in r.stdout


def test_every_store_read_decodes_with_replacement(tmp_path):
    """The mechanism: any query through a Store connection (a multi-statement one too)."""
    db = tmp_path / "m.db"
    with Store(db) as s:
        s.add("fine", id="a")
        s.conn.execute(f"INSERT INTO episodes(id, content) VALUES ('b', CAST(x'{BAD}' AS TEXT))")
        s.add("after", id="c")
        got = s.conn.execute("SELECT id, content FROM episodes ORDER BY rowid").fetchall()
        assert got == [("a", "fine"), ("b", SHOWN), ("c", "after")]
        cur = s.conn.execute("SELECT content FROM episodes WHERE id > ? ORDER BY rowid", ("a",))
        assert cur.fetchone() == (SHOWN,)
        assert cur.fetchall() == [("after",)]
        assert s.conn.execute(
            "SELECT 1; SELECT content FROM episodes ORDER BY rowid; SELECT 2"
        ).fetchall() == [(1,), ("fine",), (SHOWN,), ("after",), (2,)]


@needs_shell
def test_the_hook_recalls_the_row(tmp_path):
    db = make_db(tmp_path)
    env = env_for(tmp_path)
    payload = json.dumps({"prompt": "old note cafp", "cwd": str(tmp_path)})
    r = cli(env, "hook", str(db), "--scope", "shop", "--min-relevance", "0", stdin=payload)
    assert r.returncode == 0 and "sqlite-rrf hook:" not in r.stderr, r.stderr
    assert SHOWN in r.stdout and "bad-1" in r.stdout


@needs_shell
def test_mcp_recall_and_recent_read_the_row(tmp_path):
    pytest.importorskip("mcp.server.mcpserver")
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    db = make_db(tmp_path, in_id=True)
    env = env_for(tmp_path)

    async def go() -> List[str]:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "sqlite_rrf", "mcp", str(db), "--scope", "*"],
            env=env,
        )
        with open(tmp_path / "err.log", "w") as err:
            async with stdio_client(params, errlog=err) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    rec = await session.call_tool("recall", {"query": "old note cafp"})
                    stats = await session.call_tool("stats", {})
                    recent = await session.read_resource("memory://recent")
                    assert not rec.is_error and not stats.is_error, (rec.content, stats.content)
                    return [
                        rec.content[0].text,
                        stats.content[0].text,
                        " ".join(getattr(c, "text", "") for c in recent.contents),
                    ]

    rec, stats, recent = asyncio.run(go())
    assert SHOWN in json.loads(rec)["hits"][0]["text"] or SHOWN in rec
    assert "codec" not in rec + stats + recent
    assert SHOWN in recent


@needs_shell
def test_datasette_shows_the_row(tmp_path):
    datasette_app = pytest.importorskip("datasette.app")
    db = make_db(tmp_path)

    async def go():
        ds = datasette_app.Datasette([str(db)], settings={"sql_time_limit_ms": 60_000})
        await ds.invoke_startup()
        table = await ds.client.get("/m/episodes.json?_shape=array")
        recall = await ds.client.get("/m/recall.json?_shape=array&query=old+note+cafp&scope=*")
        return table, recall

    table, recall = asyncio.run(go())
    assert table.status_code == 200, table.text
    assert SHOWN in [r["content"] for r in table.json()]
    assert recall.status_code == 200, recall.text
    assert SHOWN in [r["content"] for r in recall.json()]
