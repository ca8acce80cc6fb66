"""The prompt hook over HTTP (pysrc/sqlite_rrf/mcp/http.py, S10 and S11): Claude Code's
``"type": "http"`` hook POSTs the hook's JSON to ``sqlite-rrf serve --http``'s ``/hook``
and gets what ``sqlite-rrf hook DB --format json`` prints for it; a client that goes away
mid-request costs one line."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, Iterator, Optional, Tuple

import pytest
from tests.conftest import embedding_model, needs_model

pytest.importorskip("uvicorn")
pytest.importorskip("mcp.server.mcpserver")

SCRIPT = os.path.join(os.path.dirname(sys.executable), "sqlite-rrf")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fill(db: Path) -> None:
    from sqlite_rrf.embedding.embedder import Embedder
    from sqlite_rrf.store import Store

    emb = Embedder(embedding_model())
    with Store(str(db), embedder=emb) as s:
        s.add(
            "Production Postgres credentials are kept in Vault at secret/shop/postgres.",
            id="creds",
            scope="shop",
            importance="high",
        )
        s.add(
            "Shop deploys go out on Tuesdays after the nightly backup.", id="deploys", scope="shop"
        )
        s.add(
            "The blog's Postgres password lives in the blog server's .env file.",
            id="blog",
            scope="blog",
        )
    emb.close()


@contextlib.contextmanager
def router(db: Path, token: Optional[str] = None, hook: bool = True) -> Iterator[Tuple[str, Any]]:
    """An HttpRouter with the warm server's hook, under uvicorn in a thread."""
    import uvicorn

    from sqlite_rrf.app import close_store, open_store
    from sqlite_rrf.mcp.build import build_server
    from sqlite_rrf.mcp.http import HttpRouter
    from sqlite_rrf.serve.hook_socket import Server

    store = open_store(str(db), "serve", model=embedding_model())
    server = Server(store, str(db), "shop")

    def build(tenant: Optional[str], scope: str) -> Any:
        return build_server(store, scope, log_level="WARNING", lock=server.lock)

    app = HttpRouter(build, "127.0.0.1", "shop", token=token, hook=server if hook else None)
    port = free_port()
    u = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    t = threading.Thread(target=u.run, daemon=True)
    t.start()
    deadline = time.time() + 30
    while not u.started:
        assert time.time() < deadline and t.is_alive(), "the server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}", store
    finally:
        u.should_exit = True
        t.join(timeout=30)
        close_store(store)


def post(
    url: str, body: bytes, headers: Optional[Dict[str, str]] = None, method: str = "POST"
) -> Tuple[int, bytes]:
    from urllib.parse import urlsplit

    u = urlsplit(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    try:
        path = u.path + (f"?{u.query}" if u.query else "")
        c.request(
            method,
            path,
            body=body if method == "POST" else None,
            headers={"Content-Type": "application/json", **(headers or {})},
        )
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def payload(prompt: str, cwd: Path, session: str = "s1") -> bytes:
    return json.dumps(
        {
            "session_id": session,
            "transcript_path": "/tmp/t.jsonl",
            "cwd": str(cwd),
            "hook_event_name": "UserPromptSubmit",
            "prompt": prompt,
        }
    ).encode()


def command_hook(db: Path, body: bytes, cwd: Path, *args: str) -> bytes:
    p = subprocess.run(
        [
            SCRIPT,
            "hook",
            str(db),
            "--format",
            "json",
            "--no-server",
            "--model",
            embedding_model(),
            *args,
        ],
        input=body,
        capture_output=True,
        cwd=str(cwd),
        timeout=120,
    )
    assert p.returncode == 0 and p.stderr == b"", p.stderr
    return p.stdout


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    d = tmp_path / "shop"
    d.mkdir()
    return d


@needs_model
def test_post_answers_as_the_command_hook(tmp_path: Path, shop: Path) -> None:
    db, twin = tmp_path / "m.db", tmp_path / "twin.db"
    fill(db)
    shutil.copy(db, twin)  # each touches its hits: the command hook answers from its twin
    answers = []
    with router(db) as (url, _):
        for prompt in ("where are the postgres credentials?", "hi", "   "):
            body = payload(prompt, shop, session=f"s-{prompt.strip()}")
            status, got = post(url + "/hook", body)
            assert status == 200
            assert got == command_hook(twin, body, shop), prompt
            answers.append(got)
    context = json.loads(answers[0])["hookSpecificOutput"]["additionalContext"]
    assert "secret/shop/postgres" in context and "scope `shop` and the shared scope" in context
    assert answers[1:] == [b"", b""]  # nothing to say: an empty body, as the command prints


@needs_model
def test_the_query_sets_the_hooks_options(tmp_path: Path, shop: Path) -> None:
    db, twin = tmp_path / "m.db", tmp_path / "twin.db"
    fill(db)
    shutil.copy(db, twin)
    body = payload("postgres password", shop)
    with router(db) as (url, _):
        status, got = post(url + "/hook?scope=*&limit=1&max_chars=20", body)
        assert status == 200
        want = command_hook(twin, body, shop, "--scope", "*", "--limit", "1", "--max-chars", "20")
        assert got == want
        assert "every scope" in json.loads(got)["hookSpecificOutput"]["additionalContext"]
        status, got = post(url + "/hook?colour=red", body)
        assert status == 400 and b"colour: not an option of the hook's URL" in got
        status, got = post(url + "/hook?limit=many", body)
        assert status == 400 and b"limit: expected a number" in got


@needs_model
def test_bad_requests_are_one_line_and_non_2xx(tmp_path: Path, shop: Path) -> None:
    from sqlite_rrf.serve.settings import MAX_REQUEST_BYTES

    db = tmp_path / "m.db"
    fill(db)
    with router(db) as (url, _):
        status, got = post(url + "/hook", b"{")
        assert status == 400 and json.loads(got) == {
            "error": 'the body: expected the hook\'s JSON ({"prompt": …})'
        }
        status, got = post(url + "/hook", b'{"session_id": "s"}')
        assert status == 400 and '"prompt" must be text' in json.loads(got)["error"]
        status, got = post(url + "/hook", b"[1]")
        assert status == 400 and b"expected a JSON object, got list" in got
        status, got = post(url + "/hook", b" " * (MAX_REQUEST_BYTES + 10))
        assert status == 413
        status, got = post(url + "/hook", b"", method="PUT")
        assert status == 405
        status, got = post(url + "/hook", b"", method="GET")
        ping = json.loads(got)
        assert status == 200 and ping["db"] == os.path.realpath(db)
        assert ping["model"] == os.path.basename(embedding_model())
        # and the server goes on
        status, got = post(url + "/hook", payload("postgres credentials", shop))
        assert status == 200 and b"secret/shop/postgres" in got


@needs_model
def test_the_hook_is_behind_the_token(tmp_path: Path, shop: Path) -> None:
    db = tmp_path / "m.db"
    fill(db)
    body = payload("postgres credentials", shop)
    with router(db, token="s3cret") as (url, _):
        assert post(url + "/hook", body)[0] == 401
        assert post(url + "/hook", body, {"Authorization": "Bearer wrong"})[0] == 401
        status, got = post(url + "/hook", body, {"Authorization": "Bearer s3cret"})
        assert status == 200 and b"secret/shop/postgres" in got


@needs_model
def test_no_hook_without_a_server_of_one_database(tmp_path: Path, shop: Path) -> None:
    db = tmp_path / "m.db"
    fill(db)
    with router(db, hook=False) as (url, _):
        status, got = post(url + "/hook", payload("postgres", shop))
    assert status == 404 and b"answers no prompt hook" in got


@needs_model
def test_the_hits_are_touched_after_the_answer(tmp_path: Path, shop: Path) -> None:
    from sqlite_rrf.store import Store

    db = tmp_path / "m.db"
    fill(db)
    with router(db) as (url, _):
        status, got = post(url + "/hook", payload("where are the postgres credentials?", shop))
        assert status == 200 and b"creds" in got
    with Store(str(db)) as s:
        assert s.get("creds").access_count == 1


def serving(db: Path, port: int, env: Dict[str, str]) -> subprocess.Popen:
    proc = subprocess.Popen(
        [
            SCRIPT,
            "serve",
            str(db),
            "--http",
            str(port),
            "--socket",
            str(db) + ".sock",
            "--model",
            embedding_model(),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.time() + 60
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.time() < deadline
            time.sleep(0.1)
    return proc


def stop(proc: subprocess.Popen) -> str:
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return err.decode()


def raw_post(port: int, path: str) -> None:
    """A POST that promises 1000 bytes, sends a few and hangs up."""
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        "Accept: application/json, text/event-stream\r\n"
        'Content-Length: 1000\r\n\r\n{"jsonrpc": '.encode()
    )
    time.sleep(0.3)
    s.close()


@needs_model
def test_a_client_gone_mid_request_is_one_line(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    fill(db)
    port = free_port()
    env = dict(os.environ, XDG_RUNTIME_DIR=str(tmp_path))
    proc = serving(db, port, env)
    try:
        raw_post(port, "/mcp")
        raw_post(port, "/mcp")
        time.sleep(1.0)
    finally:
        err = stop(proc)
    assert "Traceback" not in err and "ClientDisconnect" not in err, err
    gone = [ln for ln in err.splitlines() if "went away" in ln]
    assert gone == ["a client went away mid-request (Error handling POST request)"] * 2, err


@needs_model
def test_a_client_gone_from_the_hook_is_one_line(tmp_path: Path, caplog: Any) -> None:
    import logging

    db = tmp_path / "m.db"
    fill(db)
    with caplog.at_level(logging.WARNING), router(db) as (url, _):
        raw_post(int(url.rsplit(":", 1)[1]), "/hook")
        time.sleep(0.5)
        status, got = post(url + "/hook", payload("postgres credentials", tmp_path))
        assert status == 200  # and it goes on
    gone = [r for r in caplog.records if "went away" in r.getMessage()]
    assert len(gone) == 1 and gone[0].levelname == "WARNING" and gone[0].exc_info is None
    assert "POST /hook" in gone[0].getMessage()


@needs_model
def mcp_call(url: str, headers: Dict[str, str], tool: str, args: Dict[str, Any]) -> Any:
    """One tool call through the SDK's streamable-HTTP client."""
    import asyncio

    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def main() -> Any:
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            async with streamable_http_client(url, http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await session.call_tool(tool, args)

    return asyncio.run(main())


def test_the_hook_setup_writes_is_answered_by_serve(tmp_path: Path) -> None:
    """End to end: ``sqlite-rrf setup systemd`` and ``setup claude-code --server`` write the
    HTTP hook; ``sqlite-rrf serve DB --http PORT`` (as the unit runs it) answers the POST
    Claude Code makes, with a token through ``allowedEnvVars``."""
    home, shop = tmp_path / "home", tmp_path / "shop"
    (shop / ".git").mkdir(parents=True)
    home.mkdir()
    db = tmp_path / "m.db"
    fill(db)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
    env.update(
        HOME=str(home), XDG_RUNTIME_DIR=str(tmp_path), MYTOKEN="a-token-of-32-characters-or-so-x"
    )
    url = f"http://127.0.0.1:{port}"
    common = ["--db", str(db), "--model", embedding_model(), "--url", url, "--token-env", "MYTOKEN"]
    for args in (["systemd"], ["claude-code", "--server", "--project", str(shop)]):
        p = subprocess.run(
            [SCRIPT, "setup", *args, *common], env=env, capture_output=True, text=True
        )
        assert p.returncode == 0, p.stderr
    hook = json.loads((shop / ".claude" / "settings.json").read_text())["hooks"][
        "UserPromptSubmit"
    ][0]["hooks"][0]
    assert hook == {
        "type": "http",
        "url": f"{url}/hook",
        "timeout": 5,
        "headers": {"Authorization": "Bearer $MYTOKEN"},
        "allowedEnvVars": ["MYTOKEN"],
    }
    unit = (home / ".config" / "systemd" / "user" / "sqlite-rrf.service").read_text()
    assert "PassEnvironment=MYTOKEN" in unit
    serve_env = dict(env, SQLITE_RRF_TOKEN=env["MYTOKEN"])
    proc = subprocess.Popen(
        [SCRIPT, "serve", str(db), "--http", f"127.0.0.1:{port}", "--model", embedding_model()],
        env=serve_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=str(home),
    )
    try:
        deadline = time.time() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                assert proc.poll() is None and time.time() < deadline
                time.sleep(0.1)
        # as Claude Code sends it: each header's $VAR filled from allowedEnvVars
        headers = {k: v.replace("$MYTOKEN", env["MYTOKEN"]) for k, v in hook["headers"].items()}
        body = payload("where are the postgres credentials?", shop)
        status, got = post(hook["url"], body, headers)
        assert status == 200, got
        context = json.loads(got)["hookSpecificOutput"]["additionalContext"]
        assert "secret/shop/postgres" in context and "scope `shop`" in context
        assert post(hook["url"], body)[0] == 401
        # the MCP entry setup wrote, through the SDK's streamable-HTTP client: what the agent
        # remembers there, the project's hook recalls (its scope, not the server's default)
        entry = json.loads((shop / ".mcp.json").read_text())["mcpServers"]["memory"]
        assert entry["url"] == f"{url}/s/shop/mcp"
        mcp_headers = {
            k: v.replace("${MYTOKEN}", env["MYTOKEN"]) for k, v in entry["headers"].items()
        }
        done = mcp_call(
            entry["url"], mcp_headers, "remember", {"content": "The canary ships on Fridays."}
        )
        assert done.structured_content["scope"] == "shop"
        status, got = post(hook["url"], payload("when does the canary ship?", shop), headers)
        assert status == 200 and "canary ships on Fridays" in got.decode()
        # setup --check runs the HTTP hook as Claude Code would, and finds nothing wrong
        p = subprocess.run(
            [SCRIPT, "setup", "--check", "--project", str(shop)],
            env=env,
            cwd=str(shop),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert p.returncode == 0, p.stdout + p.stderr
        assert f"answers at {url}/hook" in p.stdout and "5 with a test prompt: p50" in p.stdout
    finally:
        stop(proc)
