"""``sqlite-rrf serve DB`` (pysrc/sqlite_rrf/serve/, S1-S7) and the hook as its client
(pysrc/sqlite_rrf/hook.py, H7-H9), end to end: real server processes, the real hook
command, the MCP SDK's streamable-HTTP client."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

from sqlite_rrf.app import socket_path
from sqlite_rrf.store import Store

EPISODES = [
    dict(
        id="shop-db",
        scope="shop",
        content="The shop's Postgres credentials are kept in Vault at secret/shop/postgres.",
    ),
    dict(
        id="shop-deploy",
        scope="shop",
        content="Shop deploys go out on Tuesdays after the nightly Postgres backup.",
    ),
    dict(
        id="blog-db",
        scope="blog",
        content="The blog uses SQLite in WAL mode; its Postgres migration was dropped.",
    ),
]
PROMPT = {
    "prompt": "where are the postgres credentials kept?",
    "session_id": "s1",
    "hook_event_name": "UserPromptSubmit",
}


def env_for(tmp_path: Path) -> Dict[str, str]:
    """No model to be had (offline, an empty cache), a runtime directory of the test's."""
    env = {k: v for k, v in os.environ.items() if k != "SQLITE_RRF_MODEL"}
    cache = tmp_path / "empty-hf-cache"
    cache.mkdir(exist_ok=True)
    run = tmp_path / "run"
    run.mkdir(exist_ok=True, mode=0o700)
    env.update(
        HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(cache), HF_HOME=str(cache), XDG_RUNTIME_DIR=str(run)
    )
    return env


def make_db(path: Path) -> Path:
    with Store(path) as s:
        s.add_many(EPISODES)
    return path


def hook(
    db: Path,
    env: Dict[str, str],
    *args: str,
    payload: Optional[dict] = None,
    importtime: bool = False,
) -> Tuple[str, str]:
    argv = (
        [sys.executable]
        + (["-X", "importtime"] if importtime else [])
        + ["-m", "sqlite_rrf", "hook", str(db), "--scope", "shop", "--min-relevance", "0", *args]
    )
    p = subprocess.run(
        argv,
        input=json.dumps(payload or PROMPT).encode(),
        capture_output=True,
        timeout=120,
        env=env,
    )
    assert p.returncode == 0
    return p.stdout.decode(), p.stderr.decode()


def imported(stderr: str) -> set:
    return {
        line.split("|")[-1].strip().split(".")[0]
        for line in stderr.splitlines()
        if line.startswith("import time:")
    }


def ping(path: str) -> Optional[dict]:
    from sqlite_rrf.hook import ask_server

    return ask_server(path, {"v": 1, "op": "ping"}, timeout=2)


@contextlib.contextmanager
def serving(
    db: Path, env: Dict[str, str], *args: str, wait: bool = True
) -> Iterator[subprocess.Popen]:
    """A ``sqlite-rrf serve`` process, ready (it answers a ping) when ``wait``."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "sqlite_rrf", "serve", str(db), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        if wait:
            sock = args[args.index("--socket") + 1] if "--socket" in args else None
            path = sock or _default_socket(db, env)
            deadline = time.time() + 60
            while ping(path) is None:
                assert proc.poll() is None, proc.communicate()[1].decode()
                assert time.time() < deadline, "the server did not start"
                time.sleep(0.1)
        yield proc
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


def _default_socket(db: Path, env: Dict[str, str]) -> str:
    old = os.environ.get("XDG_RUNTIME_DIR")
    os.environ["XDG_RUNTIME_DIR"] = env["XDG_RUNTIME_DIR"]
    try:
        return socket_path(str(db))
    finally:
        if old is None:
            del os.environ["XDG_RUNTIME_DIR"]
        else:
            os.environ["XDG_RUNTIME_DIR"] = old


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- the hook through the server ----


def test_the_hook_through_the_server_prints_what_it_prints_alone(tmp_path):
    """H7: the same output; the client imports no store, SQLite binding or numpy."""
    db = make_db(tmp_path / "m.db")
    env = env_for(tmp_path)
    alone, _ = hook(db, env, "--no-server")
    assert "shop-db" in alone
    with serving(db, env):
        served, err = hook(db, env, importtime=True)
        assert served == alone
        mods = imported(err)
        assert "sqlite_rrf" in mods  # the measurement can fail
        assert not mods & {"apsw", "numpy", "llama_cpp", "sqlite_rrf.store"}, mods
        as_json, _ = hook(db, env, "--format", "json")
        assert json.loads(as_json) == {
            "hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": alone}
        }
        # its answer comes first; the touch after it (S4)
        deadline = time.time() + 10
        while True:
            with Store(db) as s:
                if s.get("shop-db").access_count >= 2:
                    break
            assert time.time() < deadline, "the server never touched its hits"
            time.sleep(0.1)
    _, err = hook(db, env, "--no-server", importtime=True)
    assert "apsw" in imported(err)  # the control: in process, the store is imported


def test_the_socket_is_private(tmp_path):
    """S1: a 0700 directory under the runtime directory, a 0600 socket, removed on exit."""
    db = make_db(tmp_path / "m.db")
    env = env_for(tmp_path)
    path = _default_socket(db, env)
    assert path.startswith(env["XDG_RUNTIME_DIR"] + "/sqlite-rrf/")
    with serving(db, env):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert stat.S_ISSOCK(os.stat(path).st_mode)
        assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
    assert not os.path.exists(path)  # S2: removed on SIGTERM


def test_without_a_runtime_directory_the_socket_is_beside_the_database(tmp_path):
    db = make_db(tmp_path / "m.db")
    env = env_for(tmp_path)
    del env["XDG_RUNTIME_DIR"]
    with serving(db, env, "--socket", str(tmp_path / "m.db.sock")):
        pass
    old = os.environ.pop("XDG_RUNTIME_DIR", None)
    try:
        assert socket_path(str(db)) == str(db) + ".sock"
    finally:
        if old is not None:
            os.environ["XDG_RUNTIME_DIR"] = old


def test_a_stale_socket_is_replaced_and_the_hook_recalls_alone_meanwhile(tmp_path):
    """S2, H7: a socket file whose server is gone (killed) is stale."""
    db = make_db(tmp_path / "m.db")
    env = env_for(tmp_path)
    path = _default_socket(db, env)
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(path)  # bound, never listening, then closed: the file stays
    stale.close()
    assert stat.S_ISSOCK(os.stat(path).st_mode)
    alone, err = hook(db, env)
    assert "shop-db" in alone and "sqlite-rrf hook:" not in err
    with serving(db, env):
        assert ping(path)["pid"] > 0


def test_a_second_server_on_one_socket_is_refused_and_a_file_is_never_removed(tmp_path):
    db = make_db(tmp_path / "m.db")
    env = env_for(tmp_path)
    with serving(db, env):
        p = subprocess.run(
            [sys.executable, "-m", "sqlite_rrf", "serve", str(db)],
            env=env,
            capture_output=True,
            timeout=120,
        )
        assert p.returncode == 1
        assert "another server already listens at" in p.stderr.decode()
    notes = tmp_path / "notes.txt"
    notes.write_text("mine\n")
    p = subprocess.run(
        [sys.executable, "-m", "sqlite_rrf", "serve", str(db), "--socket", str(notes)],
        env=env,
        capture_output=True,
        timeout=120,
    )
    assert p.returncode == 1 and "is not a socket" in p.stderr.decode()
    assert notes.read_text() == "mine\n"


def test_a_server_killed_mid_call_leaves_the_hook_to_recall_alone(tmp_path):
    """H7: the server is stopped (SIGSTOP) while the hook waits for it, then killed; the
    hook answers from its own process."""
    db = make_db(tmp_path / "m.db")
    env = env_for(tmp_path)
    alone, _ = hook(db, env, "--no-server")
    with serving(db, env) as proc:
        proc.send_signal(signal.SIGSTOP)
        argv = [
            sys.executable,
            "-m",
            "sqlite_rrf",
            "hook",
            str(db),
            "--scope",
            "shop",
            "--min-relevance",
            "0",
        ]
        client = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
        client.stdin.write(json.dumps(PROMPT).encode())
        client.stdin.close()
        time.sleep(1.5)  # connected, its request sent, waiting
        assert client.poll() is None
        proc.kill()
        proc.wait()
        out, err = client.stdout.read(), client.stderr.read()
        client.wait(timeout=120)
        client.stdout.close()
        client.stderr.close()
        assert client.returncode == 0 and out.decode() == alone, err.decode()


def test_a_server_of_another_database_is_not_used(tmp_path):
    """S3: the hook names its database; a server of another refuses, the hook recalls."""
    db = make_db(tmp_path / "m.db")
    other = tmp_path / "other.db"
    with Store(other) as s:
        s.add(
            "The shop's Postgres credentials moved to a sealed envelope.",
            scope="shop",
            id="other-db",
        )
    env = env_for(tmp_path)
    sock = str(tmp_path / "s.sock")
    with serving(other, env, "--socket", sock):
        out, _ = hook(db, env, "--socket", sock)
        assert "shop-db" in out and "other-db" not in out
        out, _ = hook(other, env, "--socket", sock)
        assert "other-db" in out


def test_a_socket_of_another_user_is_not_used(tmp_path):
    """S1: the hook asks only a socket owned by its own user."""
    if os.getuid() != 0:
        pytest.skip("needs root to make a socket owned by another user")
    db = make_db(tmp_path / "m.db")
    env = env_for(tmp_path)
    sock = str(tmp_path / "s.sock")
    with serving(db, env, "--socket", sock):
        from sqlite_rrf.hook import ask_server

        assert ask_server(sock, {"v": 1, "op": "ping"}) is not None
        os.chown(sock, 65534, 65534)
        assert ask_server(sock, {"v": 1, "op": "ping"}) is None
        os.chown(sock, 0, 0)


def test_bad_requests_get_one_line_errors(tmp_path):
    db = make_db(tmp_path / "m.db")
    env = env_for(tmp_path)
    sock = str(tmp_path / "s.sock")
    with serving(db, env, "--socket", sock):

        def raw(line: bytes) -> dict:
            with socket.socket(socket.AF_UNIX) as s:
                s.connect(sock)
                s.sendall(line)
                return json.loads(s.makefile("rb").readline())

        assert raw(b"not json\n") == {"ok": False, "error": "request is not a JSON line"}
        assert raw(b'{"v": 2}\n')["ok"] is False
        req = {
            "v": 1,
            "op": "hook",
            "db": os.path.realpath(db),
            "prompt": "x",
            "limit": 0,
            "max_chars": 10,
            "max_total": 0,
            "format": "markdown",
        }
        got = raw(json.dumps(req).encode() + b"\n")
        assert got == {"ok": False, "error": "--limit: must be from 1 to 100, got 0"}
        ok = dict(req, limit=2, prompt="postgres credentials", scope="shop", min_relevance=0)
        assert "shop-db" in raw(json.dumps(ok).encode() + b"\n")["text"]


def test_the_hook_output_is_capped(tmp_path):
    """H8: --max-total leaves out what does not fit and says how many."""
    db = tmp_path / "m.db"
    with Store(db) as s:
        s.add_many(
            [
                dict(scope="shop", content=f"Postgres note {i}: " + "credentials " * 30)
                for i in range(10)
            ]
        )
    env = env_for(tmp_path)
    full, _ = hook(db, env, "--no-server", "--limit", "10")
    capped, _ = hook(db, env, "--no-server", "--limit", "10", "--max-total", "1000")
    assert len(full) > 3000 and len(capped) <= 1000
    assert capped.splitlines()[-1].endswith("more not shown: the hook's --max-total)")
    assert capped.splitlines()[:2] == full.splitlines()[:2]


# ---- MCP over streamable HTTP ----


def http_call(url: str, calls: List[Tuple[str, dict]], token: Optional[str] = None) -> List[Any]:
    """Run ``calls`` through the SDK's streamable-HTTP client; the results."""
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def main() -> List[Any]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            async with streamable_http_client(url, http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return [await session.call_tool(t, a) for t, a in calls]

    return asyncio.run(main())


def test_mcp_over_http_two_agents_and_the_hook_share_one_warm_store(tmp_path):
    """S5, S6: two agents at once over HTTP (the SDK's client) and the hook on the socket,
    one server; each sees the others' writes."""
    pytest.importorskip("mcp.server.mcpserver")
    from concurrent.futures import ThreadPoolExecutor

    db = make_db(tmp_path / "m.db")
    env = env_for(tmp_path)
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with serving(db, env, "--http", str(port), "--scope", "shop") as proc:
        deadline = time.time() + 60
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port)):
                break
            assert proc.poll() is None and time.time() < deadline
            time.sleep(0.1)

        def agent(i: int) -> List[Any]:
            return http_call(
                url,
                [
                    ("remember", {"content": f"Agent {i} parked the zeppelin in hangar {i}."}),
                    ("recall", {"query": "zeppelin hangar", "limit": 5, "min_relevance": 0}),
                ],
            )

        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(agent, [1, 2]))
        for remembered, recalled in results:
            assert not remembered.is_error and not recalled.is_error
            assert "text" not in recalled.structured_content["hits"][0]
        (after,) = http_call(url, [("recall", {"query": "zeppelin hangar", "min_relevance": 0})])
        texts = [h["text"] for h in json.loads(after.content[0].text)["hits"]]
        assert any("hangar 1" in t for t in texts) and any("hangar 2" in t for t in texts)
        out, _ = hook(db, env, payload=dict(PROMPT, prompt="who parked the zeppelin?"))
        assert "zeppelin" in out
    assert proc.returncode == 0


def test_http_off_loopback_needs_a_token_and_every_request_carries_it(tmp_path):
    """S6: no token, no server; with one, a request without it is answered 401."""
    pytest.importorskip("mcp.server.mcpserver")
    import httpx2

    db = make_db(tmp_path / "m.db")
    env = env_for(tmp_path)
    env.pop("SQLITE_RRF_TOKEN", None)
    p = subprocess.run(
        [sys.executable, "-m", "sqlite_rrf", "serve", str(db), "--http", f"0.0.0.0:{free_port()}"],
        env=env,
        capture_output=True,
        timeout=120,
    )
    assert p.returncode == 1
    assert "needs a bearer token" in p.stderr.decode()
    token_file = tmp_path / "token"
    token_file.write_text("s3cret-token-0123456789\n")
    port = free_port()
    with serving(db, env, "--http", f"0.0.0.0:{port}", "--token-file", str(token_file)):
        url = f"http://127.0.0.1:{port}/mcp"
        deadline = time.time() + 60
        while True:
            with contextlib.suppress(httpx2.HTTPError):
                r = httpx2.post(url, json={})
                break
            assert time.time() < deadline
            time.sleep(0.1)
        assert r.status_code == 401
        assert (
            httpx2.post(url, json={}, headers={"Authorization": "Bearer wrong"}).status_code == 401
        )
        (res,) = http_call(url, [("stats", {})], token="s3cret-token-0123456789")
        assert not res.is_error and res.structured_content["memories"] == 3
