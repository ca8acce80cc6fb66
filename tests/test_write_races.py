"""Two writers on one file: ``update`` racing ``forget``, and two updates of different
fields, through two real ``sqlite-rrf serve --http`` processes on one database and the
MCP SDK's streamable-HTTP client (Store.update: the new text is embedded first, then the
row is checked and only the fields given are written, in one IMMEDIATE transaction)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from pathlib import Path
from typing import Any, AsyncIterator, Dict, List

import pytest

pytest.importorskip("mcp.server.mcpserver", reason="the MCP SDK 2.x is not installed")

from conftest import embedding_model, needs_model
from sqlite_rrf.store import Store
from test_server import env_for, free_port, serving

#: A long text: embedding it takes tens of milliseconds, the window the race needs.
LONG = (
    "The release checklist: freeze the branch, run the migrations on a copy of the "
    "production database, compare the row counts, tag the release, build the images, "
    "push them to the registry, roll the canary to five percent of the traffic, watch "
    "the error rate for an hour, then roll out to every region one by one. "
) * 6

TRIALS = 6


def wait_port(port: int, proc: Any) -> None:
    deadline = time.time() + 120
    while True:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port)):
            return
        assert proc.poll() is None, proc.communicate()[1].decode()
        assert time.time() < deadline, "the server did not start"
        time.sleep(0.1)


@contextlib.asynccontextmanager
async def session(url: str) -> AsyncIterator[Any]:
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient(timeout=120) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                yield s


@contextlib.contextmanager
def two_servers(tmp_path: Path, db: Path) -> Any:
    """Two ``serve --http`` processes on ``db`` with the real model; their MCP URLs."""
    env = dict(env_for(tmp_path), SQLITE_RRF_MODEL=str(embedding_model()))
    pa, pb = free_port(), free_port()
    with (
        serving(
            db, env, "--http", str(pa), "--scope", "ops", "--socket", str(tmp_path / "a.sock")
        ) as a,
        serving(
            db, env, "--http", str(pb), "--scope", "ops", "--socket", str(tmp_path / "b.sock")
        ) as b,
    ):
        wait_port(pa, a)
        wait_port(pb, b)
        yield f"http://127.0.0.1:{pa}/mcp", f"http://127.0.0.1:{pb}/mcp"


def make_db(path: Path, n: int) -> Path:
    with Store(path) as s:
        s.add_many(
            dict(id=f"m{i}", scope="ops", content=f"Runbook note {i}: restart the worker pool.")
            for i in range(n)
        )
    return path


async def _race(url_a: str, url_b: str, calls_b: List[Dict[str, Any]], n: int) -> List[Any]:
    """For each memory ``m{i}``: A updates its content with the long text, B makes its
    call 20 ms later; each pair's results."""
    out = []
    async with session(url_a) as a, session(url_b) as b:
        # warm both servers (the model's first embedding)
        await a.call_tool("recall", {"query": "warm up", "min_relevance": 0})
        await b.call_tool("recall", {"query": "warm up", "min_relevance": 0})
        for i in range(n):
            call_b = dict(calls_b[0], id=f"m{i}")
            name_b = call_b.pop("tool")

            async def later() -> Any:
                await asyncio.sleep(0.02)
                return await b.call_tool(name_b, call_b)

            ra, rb = await asyncio.gather(
                a.call_tool("update", {"id": f"m{i}", "content": f"{LONG} (version {i})"}),
                later(),
            )
            out.append((ra, rb))
    return out


@needs_model
def test_an_update_racing_a_forget_never_brings_the_memory_back(tmp_path):
    db = make_db(tmp_path / "m.db", TRIALS)
    with two_servers(tmp_path, db) as (url_a, url_b):
        results = asyncio.run(_race(url_a, url_b, [{"tool": "forget"}], TRIALS))
    with Store(db) as s:
        left = [i for i in range(TRIALS) if s.get(f"m{i}") is not None]
    for i, (ra, rb) in enumerate(results):
        assert not rb.is_error and rb.structured_content == {"id": f"m{i}", "existed": True}
        if ra.is_error:  # the forget came first: the update says so, naming the id
            assert f"no memory with id 'm{i}'" in ra.content[0].text, ra.content[0].text
    # every forget said the memory existed, and nothing wrote it again: all are gone
    assert left == [], f"forgotten memories came back: {left}"


@needs_model
def test_two_updates_of_different_fields_keep_both_changes(tmp_path):
    db = make_db(tmp_path / "m.db", TRIALS)
    with two_servers(tmp_path, db) as (url_a, url_b):
        results = asyncio.run(
            _race(
                url_a,
                url_b,
                [{"tool": "update", "importance": "high", "kind": "runbook"}],
                TRIALS,
            )
        )
    for ra, rb in results:
        assert not ra.is_error and not rb.is_error, (ra.content, rb.content)
    with Store(db) as s:
        lost = []
        for i in range(TRIALS):
            ep = s.get(f"m{i}")
            assert ep is not None
            if not (
                ep.content == f"{LONG} (version {i})"
                and ep.importance == "high"
                and ep.kind == "runbook"
            ):
                lost.append((i, ep.content[:20], ep.importance, ep.kind))
    assert lost == [], f"a change was lost: {lost}"
