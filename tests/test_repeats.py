"""A fact stored again keeps the date it was first noted (``created_at``) and records the
repeat (``confirmed_at``, migration 0013): ``get``, ``list`` and MCP's ``recall`` say
"first noted 5 days ago, confirmed just now". And two small command-line frictions:
``get`` wraps a long text as ``list`` does; ``embed`` says "1 episode"."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

import pytest

from conftest import embedding_model, needs_model
from sqlite_rrf.store import Store

DAY = 86_400_000
TEXT = "The user prefers pnpm over npm for every JavaScript project."


def cli(*argv: object, model: bool = False) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "SQLITE_RRF_MODEL"}
    env.update(HF_HUB_OFFLINE="1", HF_HUB_CACHE="/nonexistent-hf-cache")
    if model:
        env["SQLITE_RRF_MODEL"] = str(embedding_model())
    p = subprocess.run(
        [sys.executable, "-m", "sqlite_rrf", *map(str, argv)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert p.returncode == 0, p.stderr
    return p


def five_days_old(path) -> int:
    then = int(time.time() * 1000) - 5 * DAY - 60_000
    with Store(path) as s:
        s.add_many([dict(id="pnpm", content=TEXT, created_at=then)])
    return then


def test_a_repeated_add_keeps_the_first_date_and_says_it_was_confirmed(tmp_path):
    db = tmp_path / "m.db"
    then = five_days_old(db)
    p = cli("add", db, TEXT.upper().replace("  ", " "))  # the same text after normalising
    assert p.stdout.strip() == "pnpm"
    with Store(db) as s:
        ep = s.get("pnpm")
        confirmed = s.conn.execute(
            "SELECT confirmed_at FROM episodes WHERE id = 'pnpm'"
        ).fetchall()[0][0]
    assert ep.created_at == then  # the first date is kept
    assert confirmed is not None and confirmed > then + 5 * DAY
    assert "(first noted 5 days ago, confirmed just now)" in cli("get", db, "pnpm").stdout
    assert "(first noted 5 days ago, confirmed just now)" in cli("list", db).stdout
    # an older repeat (an import of an old export) is the first date now
    with Store(db) as s:
        s.add_many([dict(content=TEXT, created_at=then - DAY)])
        assert s.get("pnpm").created_at == then - DAY


def test_mcp_recall_says_first_noted_and_confirmed(tmp_path):
    pytest.importorskip("mcp.server.mcpserver")
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    db = tmp_path / "m.db"
    five_days_old(db)
    keep = ("PATH", "HOME", "PYTHONPATH")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "sqlite_rrf", "mcp", str(db), "--scope", "*"],
        env={
            **{k: v for k, v in os.environ.items() if k in keep},
            "HF_HUB_OFFLINE": "1",
            "HF_HUB_CACHE": str(tmp_path / "none"),
        },
    )

    async def main():
        with open(tmp_path / "err.txt", "w") as err:
            async with stdio_client(params, errlog=err) as (read, write):
                async with ClientSession(read, write) as s:
                    await s.initialize()
                    again = await s.call_tool("remember", {"content": TEXT, "scope": "shared"})
                    got = await s.call_tool("recall", {"query": "pnpm or npm?", "min_relevance": 0})
                    return again, got

    again, got = asyncio.run(main())
    assert again.structured_content["duplicate"] is True
    (hit,) = [h for h in got.structured_content["hits"] if h["id"] == "pnpm"]
    assert hit["when"].endswith("(first noted 5 days ago, confirmed just now)"), hit


def test_get_wraps_a_long_text_as_list_does(tmp_path):
    db = tmp_path / "m.db"
    words = " ".join(f"word{i}" for i in range(120))  # one line of ~1,000 characters
    with Store(db) as s:
        s.add(words, id="long")
        s.add("    indented code line\n", id="code")
    out = cli("get", db, "long").stdout
    body = out.split("content:\n", 1)[1].splitlines()
    assert len(body) > 5 and all(len(line) <= 100 for line in body), body
    assert " ".join(line.strip() for line in body) == words  # nothing lost
    assert "       indented code line" in cli("get", db, "code").stdout  # its indent kept


@needs_model
def test_embed_says_one_episode(tmp_path):
    db = tmp_path / "m.db"
    with Store(db) as s:
        s.add("A note without its embedding.", id="one")
    p = cli("embed", db, model=True)
    assert "embedded 1 episode with" in p.stdout and "episodes" not in p.stdout, p.stdout
