"""M16 (docs/contract.md): ``sqlite-rrf mcp`` answers ``initialize`` before its model (and,
from the second start, the SDK) has loaded, and its first tool call still waits for the
model and uses it (a stdio server that waited for the model took 1.2 to 2.0 s before its
first answer). Through the MCP SDK's own stdio client, with the real
model; how long ``initialize`` takes is measured in tests/bench/bench_mcp_start.py, not
asserted here.

The proof that ``initialize`` does not wait for the model is made without a clock: a
fresh memory records its model on first use, a write, and this test holds the
database's write lock from another connection while the client initializes and lists
the tools. A server that loads the model before it answers cannot answer then.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import apsw
import pytest

pytest.importorskip(
    "mcp.server.mcpserver", reason="the MCP SDK is not installed: pip install 'sqlite-rrf[mcp]'"
)
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from conftest import embedding_model, needs_model
from sqlite_rrf.store import Store


def _env(tmp_path: Path) -> dict:
    env = {"SQLITE_RRF_MODEL": str(embedding_model()), "HOME": str(tmp_path)}
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


@needs_model
def test_initialize_answers_while_the_model_waits_and_the_first_call_uses_it(tmp_path):
    db = tmp_path / "agent.db"
    with Store(db) as s:  # migrated; no model recorded yet
        assert s.model is None
    holder = apsw.Connection(str(db))
    holder.execute("BEGIN IMMEDIATE")  # the write lock: the model's first record waits
    errlog = tmp_path / "err.txt"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "sqlite_rrf", "mcp", str(db), "--scope", "shop"],
        env=_env(tmp_path),
        cwd=str(tmp_path),
    )

    async def main() -> None:
        with open(errlog, "a", encoding="utf-8") as err:
            async with stdio_client(params, errlog=err) as (read, write):
                async with ClientSession(read, write) as session:
                    init = await asyncio.wait_for(session.initialize(), 60)
                    assert init.server_info.name == "sqlite-rrf"
                    tools = await asyncio.wait_for(session.list_tools(), 60)
                    assert {"remember", "recall"} <= {t.name for t in tools.tools}
                    # answered with the write lock held: the model had not been recorded
                    c = apsw.Connection(str(db))
                    assert list(c.execute("SELECT value FROM rrf_meta WHERE key = 'model'")) == []
                    c.close()
                    holder.execute("COMMIT")
                    res = await session.call_tool(
                        "remember", {"content": "The staging database is rebuilt nightly."}
                    )
                    assert not res.is_error, res.content
                    assert res.structured_content["embedded"] is True  # the model, first call
                    res = await session.call_tool(
                        "recall", {"query": "when is staging rebuilt", "explain": True}
                    )
                    assert not res.is_error, res.content
                    (hit,) = res.structured_content["hits"]
                    assert hit["explain"]["vec_rank"] == 1, hit

    try:
        asyncio.run(main())
    finally:
        if holder.in_transaction:
            holder.execute("ROLLBACK")
        holder.close()
    said = errlog.read_text()
    assert "default scope 'shop' (--scope)" in said, said
    with Store(db) as s:
        assert s.model and s.dim == 384


@needs_model
def test_a_named_model_that_cannot_load_ends_the_server_with_one_line(tmp_path):
    """The model loads after ``initialize``: one that was named and cannot be loaded
    still ends the server, with the command line's one-line error (as it did when the
    model loaded first: this test guards that, it passes on the old code too)."""
    db = tmp_path / "agent.db"
    with Store(db):
        pass
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF not really" * 100)
    env = dict(os.environ, SQLITE_RRF_MODEL=str(bad), HOME=str(tmp_path))
    import subprocess

    p = subprocess.run(
        [sys.executable, "-m", "sqlite_rrf", "mcp", str(db), "--scope", "shop"],
        input=b"",
        capture_output=True,
        timeout=120,
        env=env,
        cwd=str(tmp_path),
    )
    err = p.stderr.decode()
    assert p.returncode == 1, err
    assert p.stdout == b""
    last = err.strip().splitlines()[-1]
    assert (
        last.startswith("sqlite-rrf: llama.cpp could not load the model") and "broken.gguf" in last
    )
    assert "Traceback" not in err


def test_initialize_is_answered_before_the_sdk_loads(tmp_path):
    """The SDK's answer to ``initialize`` is remembered (in the user's cache); at the next
    start the same request is answered before the SDK is imported. Shown without a
    clock: the third server's SDK never finishes importing (a package named ``mcp``
    that sleeps comes first on its path), and the client still gets the answer, the one
    the SDK gave; another scope's answer is not the remembered one, and waits."""
    import json
    import select
    import subprocess

    db = tmp_path / "agent.db"
    with Store(db):
        pass
    env = {"HOME": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "sqlite_rrf", "mcp", str(db), "--scope", "shop"],
        env=env,
        cwd=str(tmp_path),
    )
    answers = []

    async def main() -> None:
        with open(tmp_path / "err.txt", "a", encoding="utf-8") as err:
            async with stdio_client(params, errlog=err) as (read, write):
                async with ClientSession(read, write) as session:
                    answers.append(await asyncio.wait_for(session.initialize(), 120))
                    tools = await asyncio.wait_for(session.list_tools(), 120)
                    assert "recall" in {t.name for t in tools.tools}

    asyncio.run(main())  # the SDK answers; its answer is remembered
    asyncio.run(main())  # answered from the cache, then by the SDK too: the same
    first, second = (a.model_dump(by_alias=True, exclude_none=True) for a in answers)
    assert first == second and first["serverInfo"]["name"] == "sqlite-rrf"
    assert "differed" not in (tmp_path / "err.txt").read_text()

    slow = tmp_path / "slow-sdk"
    slow.mkdir()
    (slow / "mcp.py").write_text("import time\ntime.sleep(600)\n")
    request = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "initialize",
        "params": {
            "protocolVersion": first["protocolVersion"],
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }
    path = os.pathsep.join([str(slow)] + ([env["PYTHONPATH"]] if "PYTHONPATH" in env else []))

    def first_line(scope: str, wait: float) -> bytes:
        """The server's first line on stdout within ``wait`` seconds (b'' if none)."""
        proc = subprocess.Popen(
            [sys.executable, "-m", "sqlite_rrf", "mcp", str(db), "--scope", scope],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=dict(env, PYTHONPATH=path),
            cwd=str(tmp_path),
        )
        try:
            proc.stdin.write(json.dumps(request).encode() + b"\n")
            proc.stdin.flush()
            ready, _, _ = select.select([proc.stdout], [], [], wait)
            return proc.stdout.readline() if ready else b""
        finally:
            proc.kill()
            proc.wait(timeout=30)
            proc.stdin.close()
            proc.stdout.close()

    answer = json.loads(first_line("shop", 120))
    assert answer == {"jsonrpc": "2.0", "id": 7, "result": first}, answer
    # another scope's instructions name it: another answer, not remembered, so the
    # server waits for its SDK (which never comes)
    assert first_line("blog", 5) == b""


def test_mcp_says_it_created_a_new_memory(tmp_path):
    """``sqlite-rrf mcp NEW.db`` (a host's configuration with a mistyped path): the
    memory is created and that is said on stderr, as ``add`` and ``import`` say it."""
    import subprocess

    new = tmp_path / "memroy.db"
    env = {"HOME": str(tmp_path), "PATH": os.environ.get("PATH", ""), "HF_HUB_OFFLINE": "1"}
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    p = subprocess.run(
        [sys.executable, "-m", "sqlite_rrf", "mcp", str(new), "--scope", "shop"],
        input=b"",  # the client goes at once: the server stops
        capture_output=True,
        timeout=120,
        env=env,
        cwd=str(tmp_path),
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout == b""
    assert f"sqlite-rrf: created a new memory at {new}" in p.stderr.decode().splitlines()
    assert new.is_file()


@pytest.mark.parametrize("closed, said", [(0, "stdin is closed"), (1, "stdout is closed")])
def test_a_closed_stdin_or_stdout_is_one_line(tmp_path, closed, said):
    """A host that starts the server without a pipe on one side: one line on stderr,
    exit status 1, and no memory created."""
    import subprocess

    new = tmp_path / "m.db"
    env = {"HOME": str(tmp_path), "PATH": os.environ.get("PATH", ""), "HF_HUB_OFFLINE": "1"}
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    p = subprocess.run(
        [sys.executable, "-m", "sqlite_rrf", "mcp", str(new), "--scope", "shop"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL if closed == 1 else subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: os.close(closed),
        timeout=120,
        env=env,
        cwd=str(tmp_path),
    )
    err = p.stderr.decode().strip().splitlines()
    assert p.returncode == 1 and len(err) == 1 and said in err[0], err
    assert not new.exists()
