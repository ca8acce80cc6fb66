"""Many agents, one server (pysrc/sqlite_rrf/serve/, S6, S8, S9): agents in separate
processes, each the MCP SDK's client over streamable HTTP with a bearer token, each in its
own scope (``/s/SCOPE/mcp``) of one memory or its own tenant's file (``serve --dir``,
``/t/TENANT/mcp``); real server processes, real files."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest
from tests.test_server import env_for, free_port, http_call

from sqlite_rrf.serve import MAX_OPEN_STORES, TENANT_NAME, route
from sqlite_rrf.store import Store

pytest.importorskip("mcp.server.mcpserver")

MODEL = "/work/shared/models/all-MiniLM-L6-v2-f16.gguf"

#: One agent: ``python -c AGENT URL TOKEN CALLS_JSON [BARRIER_DIR NAME]``: waits for
#: BARRIER_DIR/go when given (after writing BARRIER_DIR/NAME), runs the tool calls through
#: the SDK's streamable-HTTP client and prints their results as JSON; a refused
#: connection prints {"refused": ..., "statuses": [the HTTP statuses it got]} and exits 3.
AGENT = r"""
import asyncio, json, os, sys, time
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

url, token, calls = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
if len(sys.argv) > 4:
    barrier, name = sys.argv[4], sys.argv[5]
    open(os.path.join(barrier, name), "w").close()
    while not os.path.exists(os.path.join(barrier, "go")):
        time.sleep(0.01)

statuses = []

async def seen(response):
    statuses.append(response.status_code)

async def main():
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=120,
                                  event_hooks={"response": [seen]}) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                out = []
                for tool, args in calls:
                    r = await session.call_tool(tool, args)
                    out.append({"error": r.is_error,
                                "text": r.content[0].text if r.content else None,
                                "structured": r.structured_content})
                return out

try:
    print(json.dumps(asyncio.run(main())))
except BaseException as e:
    print(json.dumps({"refused": repr(e)[:500], "statuses": statuses}))
    sys.exit(3)
"""


def agent(
    url: str,
    token: Optional[str],
    calls: List[Tuple[str, dict]],
    env: Dict[str, str],
    barrier: Optional[Path] = None,
    name: str = "",
) -> subprocess.Popen:
    """An agent process (:data:`AGENT`)."""
    argv = [sys.executable, "-c", AGENT, url, token or "", json.dumps(calls)]
    if barrier is not None:
        argv += [str(barrier), name]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


def run_together(procs: Dict[str, subprocess.Popen], barrier: Path) -> Dict[str, Any]:
    """Start the agents at once (each waits at the barrier until all are ready); their
    outputs."""
    deadline = time.time() + 120
    while not all((barrier / n).exists() for n in procs):
        assert time.time() < deadline, "the agents did not start"
        for n, p in procs.items():
            assert p.poll() is None, (n, p.communicate())
        time.sleep(0.05)
    (barrier / "go").touch()
    outs = {}
    for n, p in procs.items():
        out, err = p.communicate(timeout=300)
        outs[n] = (p.returncode, json.loads(out) if out.strip() else None, err.decode())
    return outs


@contextlib.contextmanager
def server(env: Dict[str, str], *args: str) -> Iterator[Tuple[subprocess.Popen, int]]:
    """``sqlite-rrf serve ARGS --http PORT``, ready (it answers HTTP)."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "sqlite_rrf", "serve", *args, "--http", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.time() + 60
        while True:
            with contextlib.suppress(OSError):
                if raw_request(port, "GET", "/")[0]:
                    break
            assert proc.poll() is None, proc.communicate()[1].decode()
            assert time.time() < deadline, "the server did not start"
            time.sleep(0.1)
        yield proc, port
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        proc.stdout.close()
        proc.stderr.close()


def raw_request(
    port: int, method: str, path: str, headers: Optional[Dict[str, str]] = None
) -> Tuple[int, bytes]:
    """One HTTP request with the path sent as it is (no client normalises it)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(
            method,
            path,
            body=b"{}" if method == "POST" else None,
            headers={
                "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream",
                **(headers or {}),
            },
        )
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def open_files(pid: int, directory: Path) -> List[str]:
    """The files under ``directory`` process ``pid`` holds open."""
    fd_dir = f"/proc/{pid}/fd"
    out = []
    for fd in os.listdir(fd_dir):
        with contextlib.suppress(OSError):
            target = os.readlink(os.path.join(fd_dir, fd))
            if target.startswith(str(directory) + "/"):
                out.append(os.path.basename(target))
    return sorted(out)


def notes(i: int) -> List[str]:
    return [
        f"Agent {i} note {k}: the zeppelin waits in hangar {i}{k}, codeword "
        f"{['amber', 'basalt', 'cobalt'][i - 1]}."
        for k in range(4)
    ]


def agent_calls(i: int) -> List[Tuple[str, dict]]:
    """Remember four notes, then recall with a query that matches every agent's notes."""
    return [("remember", {"content": n}) for n in notes(i)] + [
        ("recall", {"query": "zeppelin hangar codeword", "limit": 20, "min_relevance": 0}),
        ("stats", {}),
    ]


def recalled(result: Dict[str, Any]) -> List[str]:
    return [h["text"] for h in json.loads(result["text"])["hits"]]


# ---- the URL names the endpoint ----


def test_route_reads_the_endpoint_from_the_path():
    """S8, S9: the scope and the tenant come from the path, percent-decoded."""
    assert route(b"/mcp") == (None, None)
    assert route(b"/mcp/") == (None, None)
    assert route(b"/s/agent-1/mcp") == (None, "agent-1")
    assert route(b"/s/team%2Fbackend%20api/mcp?x=1") == (None, "team/backend api")
    assert route(b"/t/acme/mcp") == ("acme", None)
    assert route(b"/t/acme/s/ops/mcp") == ("acme", "ops")
    for other in (
        b"/",
        b"/sse",
        b"/s/mcp",
        b"/t/acme",
        b"/t/acme/x/y/mcp",
        b"/s/a/b/mcp",
        b"mcp",
        b"/mcp/extra",
    ):
        assert route(other) is None, other
    for bad in (
        b"/t/..%2F..%2Fetc/mcp",
        b"/t/../mcp",
        b"/t/.hidden/mcp",
        b"/t/a%00b/mcp",
        b"/t/" + b"a" * 65 + b"/mcp",
        b"/t/%C3%A9/mcp",
        b"/s/%0A/mcp",
        b"/s/%FF/mcp",
    ):
        with pytest.raises(Exception) as e:
            route(bad)
        assert getattr(e.value, "status", None) == 400, bad
    assert TENANT_NAME.fullmatch("a" * 64) and not TENANT_NAME.fullmatch("a" * 65)


# ---- several agents, one memory ----


def test_three_agents_in_three_processes_each_in_its_own_scope(tmp_path):
    """S6, S8: three agent processes at once, each the SDK's client at /s/agent-N/mcp with
    the bearer token: each remembers and recalls in its own scope, every call is answered,
    and no agent's recall holds another's notes (nor those of a scope already in the
    file); a client without the token, or with a wrong one, is refused and writes nothing."""
    db = tmp_path / "m.db"
    with Store(db) as s:
        s.add("The blog's zeppelin hangar codeword is slate.", scope="blog", id="blog-1")
    env = env_for(tmp_path)
    (tmp_path / "token").write_text("team-token-0123456789\n")
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    with server(env, str(db), "--token-file", str(tmp_path / "token"), "--scope", "blog") as (
        proc,
        port,
    ):
        base = f"http://127.0.0.1:{port}"
        procs = {
            f"agent-{i}": agent(
                f"{base}/s/agent-{i}/mcp",
                "team-token-0123456789",
                agent_calls(i),
                env,
                barrier,
                f"agent-{i}",
            )
            for i in (1, 2, 3)
        }
        procs["no-token"] = agent(
            f"{base}/s/agent-1/mcp",
            None,
            [("remember", {"content": "intruder note"})],
            env,
            barrier,
            "no-token",
        )
        procs["wrong-token"] = agent(
            f"{base}/s/agent-2/mcp",
            "guess",
            [("remember", {"content": "intruder note"})],
            env,
            barrier,
            "wrong-token",
        )
        outs = run_together(procs, barrier)
        for i in (1, 2, 3):
            code, results, err = outs[f"agent-{i}"]
            assert code == 0, err
            assert len(results) == 6 and not any(r["error"] for r in results), results
            assert [r["structured"]["scope"] for r in results[:4]] == [f"agent-{i}"] * 4
            got = recalled(results[4])
            assert sorted(got) == sorted(notes(i)), (i, got)  # all its own, nothing else
            assert results[5]["structured"]["default_scope"] == f"agent-{i}"
        for name in ("no-token", "wrong-token"):
            code, out, _ = outs[name]
            assert code == 3 and set(out["statuses"]) == {401}, out
        # the server's default scope at /mcp
        code, results, err = run_together(
            {
                "plain": agent(
                    f"{base}/mcp",
                    "team-token-0123456789",
                    [("recall", {"query": "zeppelin hangar codeword", "min_relevance": 0})],
                    env,
                    barrier / "2",
                    "plain",
                )
            },
            _mkdir(barrier / "2"),
        )["plain"]
        assert code == 0, err
        assert recalled(results[0]) == ["The blog's zeppelin hangar codeword is slate."]
    assert proc.returncode == 0
    with Store(db) as s:
        by_scope = dict(s.conn.execute("SELECT scope, count(*) FROM episodes GROUP BY scope"))
        assert by_scope == {"blog": 1, "agent-1": 4, "agent-2": 4, "agent-3": 4}
        assert not s.conn.execute(
            "SELECT 1 FROM episodes WHERE content LIKE '%intruder%'"
        ).fetchall()


def _mkdir(p: Path) -> Path:
    p.mkdir()
    return p


# ---- per-tenant files ----


def test_three_tenants_in_three_processes_one_file_each(tmp_path):
    """S9: three agent processes at once, each at /t/TENANT/mcp with its tenant's own
    token, on a server keeping at most two stores open: every call is answered, each
    tenant's notes are in its own file only, and a tenant's token opens no other tenant."""
    tenants = tmp_path / "tenants"
    tenants.mkdir()
    env = env_for(tmp_path)
    tokens = {f"tenant-{i}": f"token-of-tenant-{i}-0123456789" for i in (1, 2, 3)}
    (tmp_path / "tokens").write_text(
        "# tenant token\n" + "".join(f"{t} {v}\n" for t, v in tokens.items())
    )
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    with server(
        env,
        "--dir",
        str(tenants),
        "--create-tenants",
        "--max-open",
        "2",
        "--tenant-tokens",
        str(tmp_path / "tokens"),
    ) as (proc, port):
        base = f"http://127.0.0.1:{port}"
        procs = {
            f"tenant-{i}": agent(
                f"{base}/t/tenant-{i}/mcp",
                tokens[f"tenant-{i}"],
                agent_calls(i),
                env,
                barrier,
                f"tenant-{i}",
            )
            for i in (1, 2, 3)
        }
        procs["borrowed-token"] = agent(
            f"{base}/t/tenant-2/mcp",
            tokens["tenant-1"],
            [("remember", {"content": "intruder note"})],
            env,
            barrier,
            "borrowed-token",
        )
        outs = run_together(procs, barrier)
        for i in (1, 2, 3):
            code, results, err = outs[f"tenant-{i}"]
            assert code == 0, err
            assert not any(r["error"] for r in results), results
            assert sorted(recalled(results[4])) == sorted(notes(i))
            # a tenant sees its own name, never the server's path to its file
            assert results[5]["structured"]["path"] == f"tenant tenant-{i}"
            assert results[5]["structured"]["memories"] == 4
        code, out, _ = outs["borrowed-token"]
        assert code == 3 and set(out["statuses"]) == {401}, out
        deadline = time.time() + 30  # a store over the bound closes when its call ends
        while len(open_files(proc.pid, tenants)) > 2 * 3:  # --max-open 2: db, wal, shm
            assert time.time() < deadline, open_files(proc.pid, tenants)
            time.sleep(0.1)
    assert proc.returncode == 0
    assert sorted(os.listdir(tenants)) == ["tenant-1.db", "tenant-2.db", "tenant-3.db"]
    for i in (1, 2, 3):
        with Store(tenants / f"tenant-{i}.db") as s:
            got = [r[0] for r in s.conn.execute("SELECT content FROM episodes")]
            assert sorted(got) == sorted(notes(i))


def test_unknown_tenants_are_refused_and_no_name_leaves_the_directory(tmp_path):
    """S9: without --create-tenants a tenant needs its file (404 otherwise, nothing
    created); a name outside TENANT_NAME is answered 400 and creates nothing anywhere."""
    tenants = tmp_path / "tenants"
    tenants.mkdir()
    with Store(tenants / "acme.db") as s:
        s.add("Acme's zeppelin is red.", id="acme-1")
    env = env_for(tmp_path)
    (tmp_path / "token").write_text("admin-token-0123456789\n")
    auth = {"Authorization": "Bearer admin-token-0123456789"}
    with server(env, "--dir", str(tenants), "--token-file", str(tmp_path / "token")) as (
        proc,
        port,
    ):
        status, body = raw_request(port, "POST", "/t/nobody/mcp", auth)
        assert status == 404 and b"no tenant 'nobody'" in body
        assert raw_request(port, "POST", "/t/nobody/mcp")[0] == 401  # the token first
        for path in (
            "/t/..%2Fescape/mcp",
            "/t/../escape/mcp",
            "/t/.hidden/mcp",
            "/t/%2E%2E/mcp",
            "/t/a%2Fb/mcp",
        ):
            status, _ = raw_request(port, "POST", path, auth)
            assert status in (400, 404), (path, status)
        assert raw_request(port, "POST", "/mcp", auth)[0] == 404  # one file a tenant
        code, results, err = run_together(
            {
                "acme": agent(
                    f"http://127.0.0.1:{port}/t/acme/mcp",
                    "admin-token-0123456789",
                    [("recall", {"query": "zeppelin", "min_relevance": 0})],
                    env,
                    tmp_path,
                    "acme",
                )
            },
            tmp_path,
        )["acme"]
        assert code == 0, err
        assert recalled(results[0]) == ["Acme's zeppelin is red."]
    assert sorted(os.listdir(tenants)) == ["acme.db"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["tenants", "token", "run", "empty-hf-cache", "acme", "go"]
    )


def test_stores_open_lazily_at_most_max_open_and_idle_ones_close(tmp_path):
    """S9: no store is open before its tenant's first tool call; with --max-open 2 a third
    tenant closes the least recently used; --idle-close closes the rest; a closed tenant
    opens again on its next call with its memory intact."""
    tenants = tmp_path / "tenants"
    tenants.mkdir()
    for name in ("a", "b", "c"):
        with Store(tenants / f"{name}.db") as s:
            s.add(f"Tenant {name} keeps the zeppelin log.", id=f"{name}-1")
    env = env_for(tmp_path)

    def ask(port: int, name: str) -> List[str]:
        (found,) = http_call(
            f"http://127.0.0.1:{port}/t/{name}/mcp",
            [("recall", {"query": "zeppelin log", "min_relevance": 0})],
        )
        assert not found.is_error, found.content
        return recalled({"text": found.content[0].text})

    with server(env, "--dir", str(tenants), "--max-open", "2", "--idle-close", "6") as (proc, port):
        assert open_files(proc.pid, tenants) == []  # lazily
        for name, held in (("a", {"a"}), ("b", {"a", "b"}), ("c", {"b", "c"})):
            assert ask(port, name) == [f"Tenant {name} keeps the zeppelin log."]
            assert open_files(proc.pid, tenants) == sorted(
                f"{t}.db{x}" for t in held for x in ("", "-shm", "-wal")
            )
        deadline = time.time() + 60
        while open_files(proc.pid, tenants):
            assert time.time() < deadline, "idle stores were not closed"
            time.sleep(0.2)
        assert ask(port, "a") == ["Tenant a keeps the zeppelin log."]
        assert open_files(proc.pid, tenants) == ["a.db", "a.db-shm", "a.db-wal"]


def test_serve_dir_refuses_what_it_cannot_do(tmp_path):
    """S9: the options' faults, each named."""
    env = env_for(tmp_path)
    (tmp_path / "d").mkdir()
    (tmp_path / "bad-tokens").write_text("acme\n")

    def serve(*args: str) -> str:
        p = subprocess.run(
            [sys.executable, "-m", "sqlite_rrf", "serve", *args],
            env=env,
            capture_output=True,
            timeout=120,
        )
        assert p.returncode != 0
        return p.stderr.decode()

    assert "pass --http" in serve("--dir", str(tmp_path / "d"))
    assert "not both" in serve(str(tmp_path / "m.db"), "--dir", str(tmp_path / "d"), "--http", "1")
    assert "is not a directory" in serve("--dir", str(tmp_path / "nope"), "--http", "1")
    assert "--create-tenants: only with --dir" in serve(str(tmp_path / "m.db"), "--create-tenants")
    assert "line 1: expected 'TENANT TOKEN'" in serve(
        "--dir", str(tmp_path / "d"), "--http", "1", "--tenant-tokens", str(tmp_path / "bad-tokens")
    )
    assert "needs bearer tokens" in serve(
        "--dir", str(tmp_path / "d"), "--http", f"0.0.0.0:{free_port()}"
    )
    assert "--max-open" in serve("--dir", str(tmp_path / "d"), "--http", "1", "--max-open", "0")
    assert "name the database" in serve()
    assert not (tmp_path / "m.db").exists()
    assert MAX_OPEN_STORES >= 1


@pytest.mark.embed
def test_the_model_is_loaded_once_for_every_tenant(tmp_path):
    """S9: the server loads the model once; every tenant's store embeds with it (the
    vector list ranks), and opening more tenants maps the model file no more times."""
    if not os.path.exists(MODEL):
        pytest.skip("needs the shared GGUF model")
    pytest.importorskip("llama_cpp")
    tenants = tmp_path / "tenants"
    tenants.mkdir()
    env = dict(env_for(tmp_path), SQLITE_RRF_MODEL=MODEL)

    def maps(pid: int) -> int:
        with open(f"/proc/{pid}/maps") as f:
            return sum(MODEL in line for line in f)

    with server(env, "--dir", str(tenants), "--create-tenants") as (proc, port):
        before = maps(proc.pid)
        assert before >= 1  # the measurement can see the model
        for name in ("one", "two", "three"):
            b = _mkdir(tmp_path / f"barrier-{name}")
            code, results, err = run_together(
                {
                    name: agent(
                        f"http://127.0.0.1:{port}/t/{name}/mcp",
                        None,
                        [
                            (
                                "remember",
                                {"content": f"Tenant {name}'s airship is moored at pier 9."},
                            ),
                            (
                                "recall",
                                {
                                    "query": "where is the blimp docked?",
                                    "min_relevance": 0,
                                    "explain": True,
                                },
                            ),
                            ("stats", {}),
                        ],
                        env,
                        b,
                        name,
                    )
                },
                b,
            )[name]
            assert code == 0, err
            assert results[0]["structured"]["embedded"] is True
            why = results[1]["structured"]["hits"][0]["explain"]
            assert why["vec_rank"] == 1 and why["similarity"] > 0.3
            assert results[2]["structured"]["model"]
        assert maps(proc.pid) == before


def test_endpoints_beyond_the_bound_are_dropped_and_built_again(tmp_path):
    """S8: the router keeps at most ``max_endpoints`` endpoints; the least recently used
    is dropped (its session manager stopped) and built again when it is asked for, and
    its clients never notice (stateless)."""
    import threading

    import uvicorn

    from sqlite_rrf.mcp.build import build_server
    from sqlite_rrf.serve import HttpRouter

    store = Store(tmp_path / "m.db")
    lock = threading.Lock()
    built: List[str] = []

    def build(tenant: Optional[str], scope: str) -> Any:
        built.append(scope)
        return build_server(store, scope, lock=lock)

    router = HttpRouter(build, "127.0.0.1", "default", max_endpoints=2)
    port = free_port()
    srv = uvicorn.Server(
        uvicorn.Config(router, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    try:
        deadline = time.time() + 30
        while not srv.started:
            assert time.time() < deadline and thread.is_alive()
            time.sleep(0.05)
        for scope in ("a", "b", "c", "a", "a"):
            remembered, found = http_call(
                f"http://127.0.0.1:{port}/s/{scope}/mcp",
                [
                    (
                        "remember",
                        {
                            "content": f"Scope {scope} keeps the zeppelin log, "
                            f"entry {time.time_ns()}."
                        },
                    ),
                    ("recall", {"query": "zeppelin log", "limit": 10, "min_relevance": 0}),
                ],
            )
            assert not remembered.is_error and not found.is_error
            assert remembered.structured_content["scope"] == scope
            hits = json.loads(found.content[0].text)["hits"]
            assert hits and all(f"Scope {scope} " in h["text"] for h in hits)
            assert len(router._endpoints) <= 2
        assert built == ["a", "b", "c", "a"]  # a dropped when c came, built again once
    finally:
        srv.should_exit = True
        thread.join(timeout=30)
        store.close()
    assert not thread.is_alive()
