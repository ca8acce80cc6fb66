"""Every field has a documented maximum, refused at every way in, naming the field
(sqlite_rrf.core.validate: MAX_ID_CHARS, MAX_SCOPE_CHARS, MAX_KIND_CHARS, MAX_METADATA_CHARS,
MAX_CONTENT_CHARS); every output of MCP is bounded, every field counted; an MCP recall
that fails its checks writes nothing. Through the Store, the command line, ``import``, MCP
(the SDK's stdio client) and ``serve --http`` (the SDK's HTTP client)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest

from sqlite_rrf.core.validate import (
    MAX_CONTENT_CHARS,
    MAX_ID_CHARS,
    MAX_KIND_CHARS,
    MAX_METADATA_CHARS,
    MAX_SCOPE_CHARS,
)
from sqlite_rrf.store import Store, StoreError

BIG = 1_000_000


def env() -> Dict[str, str]:
    e = {k: v for k, v in os.environ.items() if k != "SQLITE_RRF_MODEL"}
    e.update(HF_HUB_OFFLINE="1", HF_HUB_CACHE="/nonexistent-hf-cache", HF_HOME="/nonexistent")
    return e


def cli(*argv: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sqlite_rrf", *argv],
        input=stdin.encode(),
        capture_output=True,
        timeout=120,
        env=env(),
    )


OVERSIZED = [
    ("id", dict(content="x", id="i" * (MAX_ID_CHARS + 1))),
    ("scope", dict(content="x", scope="s" * (MAX_SCOPE_CHARS + 1))),
    ("kind", dict(content="x", kind="k" * (MAX_KIND_CHARS + 1))),
    ("metadata", dict(content="x", metadata={"m": "m" * MAX_METADATA_CHARS})),
    ("content", dict(content="c" * (MAX_CONTENT_CHARS + 1))),
    ("replaces", dict(content="x", replaces="r" * (MAX_ID_CHARS + 1))),
]


@pytest.mark.parametrize("field, ep", OVERSIZED, ids=[f for f, _ in OVERSIZED])
def test_the_store_refuses_each_field_over_its_maximum(tmp_path, field, ep):
    with Store(tmp_path / "m.db") as s:
        with pytest.raises(StoreError) as e:
            s.add_many([ep])
        msg = str(e.value)
        assert msg.startswith(f"{field}: ") and "more than the" in msg, msg
        assert len(msg) < 200  # the value is never echoed
        assert s.stats()["episodes"] == 0
        # at the maximum it is stored
        ok = {k: (v[:-1] if isinstance(v, str) and k != "content" else v) for k, v in ep.items()}
        if field == "metadata":
            ok["metadata"] = {"m": "m" * (MAX_METADATA_CHARS - 20)}
        if field == "content":
            ok["content"] = "c" * MAX_CONTENT_CHARS
        if field == "replaces":
            ok.pop("replaces")
        s.add_many([ok])
        assert s.stats()["episodes"] == 1


def test_the_command_line_and_import_refuse_them_naming_the_field(tmp_path):
    db = tmp_path / "m.db"
    p = cli("add", str(db), "x", "--id", "i" * (MAX_ID_CHARS + 1))
    assert p.returncode == 1
    assert f"id: {MAX_ID_CHARS + 1:,} characters, more than the {MAX_ID_CHARS}" in p.stderr.decode()
    line = json.dumps(dict(content="x", kind="k" * BIG))
    p = cli("import", str(db), "-", stdin=line + "\n")
    err = p.stderr.decode()
    assert p.returncode == 1 and "line 1: kind: 1,000,000 characters" in err, err
    assert len(err) < 1000
    with Store(db) as s:
        assert s.stats()["episodes"] == 0


# ---- MCP ----


def _session_params(db: Path) -> Any:
    from mcp.client.stdio import StdioServerParameters

    keep = ("PATH", "HOME", "PYTHONPATH", "HF_HUB_OFFLINE", "HF_HUB_CACHE", "HF_HOME")
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "sqlite_rrf", "mcp", str(db), "--scope", "shop"],
        env={k: v for k, v in env().items() if k in keep},
    )


def mcp_calls(db: Path, tmp_path: Path, calls: List[Any]) -> List[Any]:
    """Run ``calls`` ((tool, arguments) or ("resource", uri)) through one stdio server."""
    pytest.importorskip("mcp.server.mcpserver")
    from mcp import ClientSession
    from mcp.client.stdio import stdio_client

    async def main() -> List[Any]:
        with open(tmp_path / "err.txt", "a") as errlog:
            async with stdio_client(_session_params(db), errlog=errlog) as (read, write):
                async with ClientSession(read, write) as s:
                    await s.initialize()
                    out = []
                    for tool, args in calls:
                        if tool == "resource":
                            out.append(await s.read_resource(args))
                        else:
                            out.append(await s.call_tool(tool, args))
                    return out

    return asyncio.run(main())


def size(res: Any) -> int:
    """The bytes a tool's result puts on the wire: its text and its structured content."""
    text = sum(len(c.text.encode()) for c in res.content if hasattr(c, "text"))
    return text + len(json.dumps(res.structured_content or {}).encode())


def test_mcp_refuses_oversized_fields_and_bounds_every_output(tmp_path):
    db = tmp_path / "m.db"
    with Store(db) as s:
        s.add_many(
            [
                dict(
                    id=f"{i:03d}" + "i" * (MAX_ID_CHARS - 3),
                    scope="shop",
                    kind="k" * MAX_KIND_CHARS,
                    content=f"Kafka broker {i} runs on port 9092 of the shop cluster. " * 40,
                )
                for i in range(12)
            ]
            + [dict(content=f"note {i} about scope {i}", scope=f"scope{i}") for i in range(80)]
        )
    results = mcp_calls(
        db,
        tmp_path,
        [
            ("remember", {"content": "x", "id": "i" * BIG}),
            ("remember", {"content": "x", "kind": "k" * BIG}),
            ("remember", {"content": "x", "scope": "s" * BIG}),
            ("remember", {"content": "x", "metadata": {"m": "m" * BIG}}),
            ("forget", {"id": "i" * BIG}),
            ("update", {"id": "i" * BIG, "importance": "high"}),
            ("recall", {"query": "kafka broker port", "limit": 1, "max_chars": 50}),
            ("recall", {"query": "kafka broker port", "limit": 20, "max_chars": 50}),
            ("resource", "memory://recent"),
            ("stats", {}),
        ],
    )
    for res, field in zip(results[:6], ["id", "kind", "scope", "metadata", "id", "id"]):
        assert res.is_error, res.structured_content
        text = res.content[0].text
        assert text.startswith(f"{field}: ") and len(text) < 300, text[:300]
    one, twenty, recent, stats = results[6:]
    assert not one.is_error and len(one.structured_content["hits"]) == 1
    # 50 characters of text, and an id, a scope and a time within their maximums
    assert size(one) < 2 * (50 + MAX_ID_CHARS + MAX_SCOPE_CHARS + 400), size(one)
    assert size(twenty) < 20 * 2 * (50 + MAX_ID_CHARS + MAX_SCOPE_CHARS + 400), size(twenty)
    text = recent.contents[0].text
    assert len(text.encode()) < 10 * (300 + MAX_ID_CHARS + MAX_SCOPE_CHARS + 200), len(text)
    st = stats.structured_content
    assert len(st["by_scope"]) <= 50 and st["other_scopes"] == 81 - 50
    with Store(db) as s:  # nothing was written by the refused calls
        assert s.stats()["episodes"] == 92


def test_a_recall_that_fails_its_checks_touches_nothing(tmp_path):
    db = tmp_path / "m.db"
    with Store(db) as s:
        s.add_many(
            [
                dict(id=f"k{i}", scope="shop", content=f"Kafka broker {i} port 9092.")
                for i in range(3)
            ]
        )
    calls = [
        ("recall", {"query": "kafka broker", "max_chars": 0, "min_relevance": 0}),
        ("recall", {"query": "kafka broker", "max_chars": 10**9, "min_relevance": 0}),
    ]
    calls.append(
        ("recall", {"query": "kafka broker", "since": "2026-11-25", "until": "2026-11-24"})
    )
    *bad_chars, bad_times = mcp_calls(db, tmp_path, calls)
    for res in bad_chars:
        assert res.is_error and res.content[0].text.startswith("max_chars: must be from 1 to")
    assert bad_times.is_error and "is not before until" in bad_times.content[0].text
    with Store(db) as s:
        counts = [s.get(f"k{i}").access_count for i in range(3)]
    assert counts == [0, 0, 0], counts  # no hit was touched


def test_over_http_a_server_refuses_them_too(tmp_path):
    pytest.importorskip("mcp.server.mcpserver")
    import contextlib
    import socket
    import time

    from test_server import env_for, free_port, http_call, make_db, serving

    db = make_db(tmp_path / "m.db")
    port = free_port()
    with serving(db, env_for(tmp_path), "--http", str(port), "--scope", "shop") as proc:
        deadline = time.time() + 60
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port)):
                break
            assert proc.poll() is None and time.time() < deadline
            time.sleep(0.1)
        (res,) = http_call(
            f"http://127.0.0.1:{port}/mcp", [("remember", {"content": "x", "scope": "s" * BIG})]
        )
    assert res.is_error and res.content[0].text.startswith("scope: 1,000,000 characters")


def test_stats_through_a_tenants_url_names_the_tenant_not_the_servers_path(tmp_path):
    pytest.importorskip("mcp.server.mcpserver")
    from test_server import env_for, http_call
    from test_tenants import server

    tenants = tmp_path / "tenants"
    tenants.mkdir()
    token = "token-of-acme-0123456789abcdef"
    (tmp_path / "tokens").write_text(f"acme {token}\n")
    with server(
        env_for(tmp_path),
        "--dir",
        str(tenants),
        "--create-tenants",
        "--tenant-tokens",
        str(tmp_path / "tokens"),
    ) as (proc, port):
        (res,) = http_call(f"http://127.0.0.1:{port}/t/acme/mcp", [("stats", {})], token)
    assert not res.is_error, res.content
    assert res.structured_content["path"] == "tenant acme"
    assert str(tmp_path) not in res.content[0].text
