"""``sqlite-rrf serve DB``: one warm process that keeps the model, the connection and its
prepared statements, and serves every way in.

- The prompt hook over a Unix socket (:func:`sqlite_rrf.app.socket_path`: under
  ``$XDG_RUNTIME_DIR/sqlite-rrf/``, else ``DB.sock`` beside the database; ``--socket``
  chooses another). ``sqlite-rrf hook DB`` asks the server when one listens there and
  recalls in its own process otherwise.
- MCP over streamable HTTP (``--http [HOST:]PORT``, the SDK's transport at ``/mcp``, and
  at ``/s/SCOPE/mcp`` for each scope, S8), the same tools as ``sqlite-rrf mcp`` (stdio),
  built by the same code (:func:`sqlite_rrf.mcp_server.build_server`).

``sqlite-rrf serve --dir DIR --http [HOST:]PORT`` serves one memory file per tenant
instead (S9), over HTTP only.

Requirements (tests/test_server.py cites them):

S1. The socket is the server's own: its directory under ``$XDG_RUNTIME_DIR`` is made with
    mode 0700, the socket has mode 0600 (made under umask 0177, then set), and a
    connection from another user (``SO_PEERCRED``) is closed unanswered. The hook uses a
    socket only when it is a socket owned by the hook's own user.
S2. One server per socket: a socket file whose server answers is refused (the second
    server exits with one line saying so); a socket file nobody answers (a server that was
    killed) is stale and replaced; a path that is not a socket is never removed. On exit
    (SIGTERM, SIGINT) the server removes its socket if it is still its own.
S3. The protocol: one JSON object per line, one request per connection. The hook sends
    ``{"v": 1, "op": "hook", "db": REAL_PATH, "prompt": …, "session": …, "scope": …,
    "limit": …, "max_chars": …, "max_total": …, "min_relevance": …, "topic_gate": …,
    "format": "markdown" | "json"}`` and reads ``{"ok": true, "text": …}`` (the exact
    output to print, :func:`sqlite_rrf.hook.respond`) or ``{"ok": false, "error": …}``.
    ``{"v": 1, "op": "ping"}`` answers ``{"ok": true, "db": …, "pid": …, "version": …}``.
    A request for another database is refused (``"wrong_db": true``), and the hook then
    recalls in its own process. A request line is at most :data:`MAX_REQUEST_BYTES`.
S4. The server answers the hook before it touches the hits, and touches them on a
    connection of its own, in a thread of its own, one touch after another: a touch that
    waits for another process's write lock (at most the store's touch patience) delays
    no answer.
S5. One Store serves the socket and MCP, one call at a time (a lock shared with the MCP
    tools).
S6. MCP over HTTP binds 127.0.0.1 by default. Bound to any other address it needs a
    bearer token (``--token-file FILE`` or ``$SQLITE_RRF_TOKEN``), and every request
    without ``Authorization: Bearer TOKEN`` is answered 401; with a token given, loopback
    requests need it too.
S7. Two servers may open one file under different sockets (SQLite's WAL, as two MCP
    servers): each one's writes are visible to the other's recalls; their hook sockets
    are distinct only if ``--socket`` differs (the default path is per database).
S8. Many agents, one server: an agent chooses its scope by the URL it is given (what an
    agent host configures): ``/mcp`` serves the server's default scope, ``/s/SCOPE/mcp``
    the scope SCOPE (percent-encoded; any text without control characters) as the tools'
    default (:data:`SCOPE_SEGMENT`). The scope in the URL is a default, not a wall: a
    tool call may still name another scope (scopes organise agents that cooperate;
    tenants, S9, separate those that must not see each other). Every endpoint is
    stateless MCP over streamable HTTP (no session is kept between requests), so the
    server can drop an endpoint it has not used lately (at most :data:`MAX_ENDPOINTS`
    are kept) without breaking a client.
S9. Per-tenant files (``--dir DIR``): one directory, one memory file per tenant
    (``DIR/TENANT.db``), one server, HTTP only (no hook socket). A tenant is chosen by
    the URL, ``/t/TENANT/mcp`` or ``/t/TENANT/s/SCOPE/mcp``; a tenant's name is 1 to 64
    of ``A-Z a-z 0-9 . _ -``, starting with a letter or digit (:data:`TENANT_NAME`), so
    no name reaches outside DIR; another is answered 400. A tenant whose file does not
    exist is answered 404 unless the server was started with ``--create-tenants`` (the
    file is then created on its first request). ``--tenant-tokens FILE`` gives each
    tenant its own bearer token (lines ``TENANT TOKEN``): that token opens that
    tenant's endpoints and no other's (the server's own token, ``--token-file``, opens
    every tenant's). Stores open lazily on a tenant's first tool call and share the
    one model the server loaded; at most ``--max-open`` (default
    :data:`MAX_OPEN_STORES`) stay open (the least recently used is closed first, never
    one in a call: a store over the bound because the others were in calls is closed
    when its call ends), and a store unused for ``--idle-close`` seconds (default
    :data:`IDLE_CLOSE_SECONDS`) is closed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import re
import signal
import socket
import socketserver
import stat
import struct
import sys
import threading
import time
import unicodedata
from collections import OrderedDict
from typing import Any, Callable, Dict, Optional, Tuple

from .app import (UserError, error_message, fault_message, note, open_store, socket_path)

#: The protocol's version (the ``v`` of every request).
PROTOCOL = 1
#: The longest request line the server reads (a prompt of this size is cut by the store's
#: own query limit long before).
MAX_REQUEST_BYTES = 1 << 20
#: The environment variable that holds the HTTP bearer token (``--token-file`` wins).
TOKEN_ENV = "SQLITE_RRF_TOKEN"
#: The HTTP endpoint's path (S8: also the last segment of every other endpoint's).
MCP_PATH = "/mcp"
#: S8: the path segment before a scope (``/s/SCOPE/mcp``).
SCOPE_SEGMENT = "s"
#: S9: the path segment before a tenant (``/t/TENANT/mcp``).
TENANT_SEGMENT = "t"
#: S9: what a tenant's name may be; its file is ``DIR/NAME`` + :data:`TENANT_SUFFIX`.
TENANT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
#: S9: a tenant's file name is its name and this suffix.
TENANT_SUFFIX = ".db"
#: S9: ``--max-open``'s default: how many tenants' stores a ``--dir`` server keeps open
#: (each holds three files: the database, its WAL and its shared-memory index).
MAX_OPEN_STORES = 32
#: S9: ``--idle-close``'s default, in seconds: a tenant's store unused this long is closed.
IDLE_CLOSE_SECONDS = 300
#: S8: how many MCP endpoints (a tenant and a scope, each an MCP server object of about
#: 0.4 MB) the server keeps; the least recently used is dropped first and built again
#: (about 15 ms) when it is asked for.
MAX_ENDPOINTS = 256
LOOPBACK = ("127.0.0.1", "localhost", "::1")

_PREFIX = "sqlite-rrf serve"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The server's arguments (cli.py adds --model and --n-ctx)."""
    p.add_argument("db", nargs="?", help="the memory database (created if it does not "
                   "exist); or --dir for one file per tenant")
    p.add_argument("--dir", metavar="DIR", dest="tenant_dir",
                   help="serve every tenant's memory in DIR (DIR/TENANT.db) over HTTP "
                        "(needs --http) at /t/TENANT/mcp, instead of one database")
    p.add_argument("--create-tenants", action="store_true", dest="create_tenants",
                   help="with --dir: create a tenant's file on its first request (default: "
                        "a tenant whose file does not exist is answered 404)")
    p.add_argument("--tenant-tokens", metavar="FILE", dest="tenant_tokens",
                   help="with --dir: each tenant's own bearer token, one 'TENANT TOKEN' "
                        "line each; a tenant's token opens only its endpoints")
    p.add_argument("--max-open", metavar="N", type=_positive_int, dest="max_open",
                   default=MAX_OPEN_STORES,
                   help=f"with --dir: tenants' stores kept open at once, the least recently "
                        f"used closed first (default {MAX_OPEN_STORES})")
    p.add_argument("--idle-close", metavar="SECONDS", type=_positive_float,
                   dest="idle_close", default=IDLE_CLOSE_SECONDS,
                   help=f"with --dir: close a tenant's store unused this long (default "
                        f"{IDLE_CLOSE_SECONDS})")
    p.add_argument("--socket", metavar="PATH",
                   help="the hook's Unix socket (default: $XDG_RUNTIME_DIR/sqlite-rrf/"
                        "NAME-CRC.sock, else DB.sock beside the database; the hook finds "
                        "the default by itself)")
    p.add_argument("--http", metavar="[HOST:]PORT",
                   help="also serve MCP over streamable HTTP at http://HOST:PORT/mcp (HOST "
                        "default 127.0.0.1; another address needs a bearer token)")
    p.add_argument("--token-file", metavar="FILE", dest="token_file",
                   help=f"the HTTP bearer token, read from FILE (default: ${TOKEN_ENV}); "
                        "needed when --http binds an address other than loopback")
    p.add_argument("--scope", help="the MCP tools' default scope (as `sqlite-rrf mcp "
                   "--scope`) at /mcp (and /t/TENANT/mcp); /s/SCOPE/mcp serves SCOPE. "
                   "Default: derived from the working directory ('' with --dir)")
    p.add_argument("--log-level", choices=("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"),
                   default="WARNING", dest="log_level",
                   help="the MCP SDK's and the HTTP server's logging on stderr (default "
                        "WARNING)")


def _positive_int(text: str) -> int:
    if not text.isascii() or not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return int(text)


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds above 0, got {text!r}")
    return value


def _say(message: str) -> None:
    print(f"{_PREFIX}: {message}", file=sys.stderr, flush=True)


# ---- the socket ----

def _parse_http(text: str) -> Tuple[str, int]:
    """``[HOST:]PORT`` → (host, port); ``[::1]:8080`` for IPv6."""
    host, _, port = text.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if not port.isascii() or not port.isdigit() or not 0 < int(port) < 65536:
        raise UserError(f"--http: expected [HOST:]PORT with a port from 1 to 65535, got "
                        f"{text!r}")
    return host, int(port)


def _read_token(args: argparse.Namespace) -> Optional[str]:
    path = getattr(args, "token_file", None)
    if path:
        try:
            with open(path, encoding="utf-8") as f:
                token = f.read().strip()
        except (OSError, UnicodeDecodeError) as e:
            raise UserError(f"--token-file: {path}: "
                            f"{getattr(e, 'strerror', None) or 'not UTF-8 text'}") from None
        if not token:
            raise UserError(f"--token-file: {path} is empty")
        return token
    token = os.environ.get(TOKEN_ENV, "").strip()
    return token or None


def _prepare_socket(path: str) -> None:
    """Make the socket's directory (mode 0700 under the runtime directory) and clear a
    stale socket file (S2)."""
    d = os.path.dirname(path) or "."
    from .app import RUNTIME_SUBDIR

    if os.path.basename(d) == RUNTIME_SUBDIR and not os.path.isdir(d):
        os.mkdir(d, 0o700)
    if os.path.basename(d) == RUNTIME_SUBDIR:
        st = os.stat(d)
        if st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise UserError(f"{d}: the socket directory must be yours with mode 0700 "
                            f"(it is mode {stat.S_IMODE(st.st_mode):04o})")
    if len(os.fsencode(path)) > 107:
        raise UserError(f"--socket: {path} is too long for a Unix socket (at most 107 "
                        "bytes); pass a shorter --socket")
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise UserError(f"{path} exists and is not a socket; it is left alone (pass "
                        "another --socket)")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(2)
    try:
        probe.connect(path)
    except (ConnectionRefusedError, FileNotFoundError):
        os.unlink(path)  # stale: its server is gone
        return
    except OSError:
        pass
    finally:
        probe.close()
    raise UserError(f"another server already listens at {path}; stop it first, or pass "
                    "another --socket")


class _Handler(socketserver.StreamRequestHandler):
    """One hook connection: one request line, one answer line (S3)."""

    server: "_SocketServer"

    def handle(self) -> None:
        srv = self.server
        if not srv.peer_allowed(self.connection):
            return
        line = self.rfile.readline(MAX_REQUEST_BYTES + 1)
        after = None
        try:
            if len(line) > MAX_REQUEST_BYTES:
                raise UserError(f"request longer than {MAX_REQUEST_BYTES} bytes")
            try:
                req = json.loads(line)
            except ValueError:
                raise UserError("request is not a JSON line") from None
            if not isinstance(req, dict) or req.get("v") != PROTOCOL:
                raise UserError(f"expected a JSON object with \"v\": {PROTOCOL}")
            answer, after = srv.serve_request(req)
        except Exception as e:
            answer = {"ok": False, "error": srv.describe(e)}
        try:
            self.wfile.write(json.dumps(answer, ensure_ascii=False).encode("utf-8") + b"\n")
            self.wfile.flush()
        except OSError:
            pass
        if after is not None:  # S4: the touch after the answer
            after()


class _SocketServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, path: str, serve: "Server") -> None:
        self.app = serve
        old = os.umask(0o177)
        try:
            super().__init__(path, _Handler)
        finally:
            os.umask(old)
        os.chmod(path, 0o600)  # S1
        self.inode = os.stat(path).st_ino

    def peer_allowed(self, conn: socket.socket) -> bool:
        """S1: only the server's own user (and root) may ask."""
        opt = getattr(socket, "SO_PEERCRED", None)
        if opt is None:
            return True
        try:
            _, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, opt,
                                                             struct.calcsize("3i")))
        except OSError:
            return False
        return uid in (os.getuid(), 0)

    def serve_request(self, req: Dict[str, Any]) -> Tuple[Dict[str, Any], Any]:
        return self.app.serve_request(req)

    def describe(self, e: BaseException) -> str:
        return self.app.describe(e)


class Server:
    """The warm process: one Store (with its model), one lock, the hook socket and,
    optionally, MCP over HTTP."""

    def __init__(self, store: Any, db: str, default_scope: str) -> None:
        self.store = store
        self.db = db
        self.real_db = os.path.realpath(db)
        self.default_scope = default_scope
        self.lock = threading.Lock()  # S5: shared with the MCP tools
        self._touches: "queue.SimpleQueue[Any]" = queue.SimpleQueue()
        self._toucher: Any = None
        self._touch_thread: Optional[threading.Thread] = None

    def start_touching(self) -> None:
        """S4: a second connection (no model) and its thread, for the hook's touches."""
        from .store import Store

        self._toucher = Store(self.db)
        self._touch_thread = threading.Thread(target=self._touch_loop, name="touch",
                                              daemon=True)
        self._touch_thread.start()

    def _touch_loop(self) -> None:
        while True:
            result = self._touches.get()
            if result is None:
                break
            with contextlib.suppress(Exception):  # best effort: the answer is out
                self._toucher.touch(result)

    def stop_touching(self) -> None:
        if self._touch_thread is not None:
            self._touches.put(None)
            self._touch_thread.join(timeout=5)
        if self._toucher is not None:
            with contextlib.suppress(Exception):
                self._toucher.close()

    def describe(self, e: BaseException) -> str:
        known = error_message(e)
        if known is not None:
            return known if isinstance(e, UserError) else f"{self.db}: {known}"
        if isinstance(e, ValueError):
            return str(e)
        if os.environ.get("SQLITE_RRF_DEBUG"):
            import traceback

            traceback.print_exc()
        return f"{self.db}: {fault_message(e)}"

    def serve_request(self, req: Dict[str, Any]) -> Tuple[Dict[str, Any], Any]:
        """The answer to one request and what to do after sending it (S3, S4)."""
        from . import __version__

        op = req.get("op")
        if op == "ping":
            return {"ok": True, "db": self.real_db, "pid": os.getpid(),
                    "version": __version__}, None
        if op != "hook":
            raise UserError(f"unknown op {op!r} (expected 'hook' or 'ping')")
        if req.get("db") != self.real_db:
            return {"ok": False, "wrong_db": True,
                    "error": f"this server serves {self.real_db}"}, None
        from .hook import check_request, respond

        check_request(req)
        with self.lock:
            text, result = respond(self.store, req)

        def touch() -> None:
            if result is not None:
                if self._touch_thread is not None:
                    self._touches.put(result)
                else:
                    with self.lock, contextlib.suppress(Exception):
                        self.store.touch(result)

        return {"ok": True, "text": text}, touch


# ---- MCP over HTTP: endpoints by URL (S6, S8, S9) ----

class _HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _segment(raw: bytes, what: str) -> str:
    """One percent-encoded path segment as text."""
    from urllib.parse import unquote_to_bytes

    try:
        text = unquote_to_bytes(raw).decode("utf-8")
    except UnicodeDecodeError:
        raise _HttpError(400, f"the {what} in the URL is not UTF-8") from None
    if not text or any(unicodedata.category(ch) == "Cc" for ch in text):
        raise _HttpError(400, f"the {what} in the URL is empty or holds control characters")
    return text


def route(raw_path: bytes) -> Optional[Tuple[Optional[str], Optional[str]]]:
    """``(tenant, scope)`` of an endpoint's path (S8, S9): ``/mcp`` → (None, None),
    ``/s/SCOPE/mcp`` → (None, SCOPE), ``/t/TENANT/mcp`` → (TENANT, None),
    ``/t/TENANT/s/SCOPE/mcp`` → (TENANT, SCOPE); None for a path that is none of these.
    A tenant's name that :data:`TENANT_NAME` refuses is an error (400)."""
    parts = raw_path.split(b"?", 1)[0].split(b"/")
    if parts[-1] == b"" and len(parts) > 2:
        parts.pop()  # one trailing slash
    if parts[:1] != [b""] or parts[-1] != MCP_PATH[1:].encode():
        return None
    middle = parts[1:-1]
    tenant = scope = None
    if middle[:1] == [TENANT_SEGMENT.encode()] and len(middle) >= 2:
        tenant = _segment(middle[1], "tenant")
        if not TENANT_NAME.fullmatch(tenant):
            raise _HttpError(400, f"tenant {tenant!r}: a tenant's name is 1 to 64 letters, "
                                  "digits, '.', '_' or '-', starting with a letter or digit")
        middle = middle[2:]
    if middle[:1] == [SCOPE_SEGMENT.encode()] and len(middle) == 2:
        scope = _segment(middle[1], "scope")
        middle = []
    return (tenant, scope) if not middle else None


def read_tenant_tokens(path: str) -> Dict[str, str]:
    """``--tenant-tokens FILE``: ``TENANT TOKEN`` a line (``#`` starts a comment) → a
    token for each tenant (S9)."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"--tenant-tokens: {path}: "
                        f"{getattr(e, 'strerror', None) or 'not UTF-8 text'}") from None
    tokens: Dict[str, str] = {}
    for n, line in enumerate(lines, 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if len(words) != 2 or not TENANT_NAME.fullmatch(words[0]):
            raise UserError(f"--tenant-tokens: {path} line {n}: expected 'TENANT TOKEN' "
                            "(a tenant's name is letters, digits, '.', '_', '-')")
        if words[0] in tokens:
            raise UserError(f"--tenant-tokens: {path} line {n}: tenant {words[0]!r} has "
                            "a token already")
        tokens[words[0]] = words[1]
    if not tokens:
        raise UserError(f"--tenant-tokens: {path} names no tenant")
    return tokens


class _Endpoint:
    """One MCP server (its tools bound to a store and a default scope) and its stateless
    session manager, running in the router's task group."""

    def __init__(self, key: Tuple[Optional[str], str]) -> None:
        import anyio

        self.key = key
        self.manager: Any = None
        self.ready = anyio.Event()
        self.stop = anyio.Event()
        self.inflight = 0


class HttpRouter:
    """The ASGI app of ``--http``: each request goes to the endpoint its path names (S8,
    S9), behind the bearer tokens (S6). ``build(tenant, scope)`` makes an endpoint's
    ``MCPServer``; ``tenants`` (``--dir``) says which tenants exist."""

    def __init__(self, build: Callable[[Optional[str], str], Any], host: str,
                 default_scope: str, token: Optional[str] = None,
                 tenant_tokens: Optional[Dict[str, str]] = None,
                 tenants: Optional["TenantPool"] = None,
                 max_endpoints: int = MAX_ENDPOINTS) -> None:
        self.build = build
        self.host = host
        self.default_scope = default_scope
        self.tenants = tenants
        self.max_endpoints = max_endpoints
        self._token = None if token is None else f"Bearer {token}".encode("utf-8")
        self._tenant_tokens = {t: f"Bearer {v}".encode("utf-8")
                               for t, v in (tenant_tokens or {}).items()}
        self._endpoints: "OrderedDict[Tuple[Optional[str], str], _Endpoint]" = OrderedDict()
        self._tg: Any = None

    # -- the server's life --

    async def __call__(self, scope: Dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            try:
                await self._serve(scope, receive, send)
            except _HttpError as e:
                await _answer(send, e.status, str(e))
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})

    async def _lifespan(self, receive: Any, send: Any) -> None:
        import anyio

        await receive()  # lifespan.startup
        async with anyio.create_task_group() as tg:
            self._tg = tg
            if self.tenants is not None:
                tg.start_soon(self._close_idle_stores)
            await send({"type": "lifespan.startup.complete"})
            await receive()  # lifespan.shutdown
            tg.cancel_scope.cancel()
        self._endpoints.clear()
        await send({"type": "lifespan.shutdown.complete"})

    async def _close_idle_stores(self) -> None:
        import anyio

        assert self.tenants is not None
        every = max(0.5, min(self.tenants.idle_close / 4, 30.0))
        while True:
            await anyio.sleep(every)
            await anyio.to_thread.run_sync(self.tenants.close_idle)

    # -- a request --

    def _authorised(self, scope: Dict[str, Any], tenant: Optional[str]) -> bool:
        import hmac

        if self._token is None and not self._tenant_tokens:
            return True
        got = dict(scope.get("headers") or []).get(b"authorization", b"")
        ok = False
        for expected in (self._token, self._tenant_tokens.get(tenant or "")):
            if expected is not None and hmac.compare_digest(got, expected):
                ok = True
        return ok

    async def _serve(self, scope: Dict[str, Any], receive: Any, send: Any) -> None:
        raw = scope.get("raw_path") or scope["path"].encode("utf-8")
        where = route(raw)
        if where is None:
            raise _HttpError(404, self._paths_hint())
        tenant, scope_name = where
        if not self._authorised(scope, tenant):
            body = b'{"error": "unauthorized: send Authorization: Bearer TOKEN"}'
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"www-authenticate", b'Bearer realm="sqlite-rrf"'),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        if (tenant is None) != (self.tenants is None):
            raise _HttpError(404, self._paths_hint())
        if tenant is not None:
            assert self.tenants is not None
            if not self.tenants.exists(tenant) and not self.tenants.create:
                raise _HttpError(404, f"no tenant {tenant!r} (its file does not exist; "
                                      "the server was not started with --create-tenants)")
        endpoint = await self._endpoint((tenant, self.default_scope if scope_name is None
                                         else scope_name))
        endpoint.inflight += 1
        try:
            await endpoint.manager.handle_request(scope, receive, send)
        finally:
            endpoint.inflight -= 1
        if self.tenants is not None and self.tenants.open_count() > self.tenants.max_open:
            import anyio  # the stores in calls when others opened: closed now

            await anyio.to_thread.run_sync(self.tenants.trim)

    def _paths_hint(self) -> str:
        if self.tenants is not None:
            return (f"not an endpoint: this server serves tenants at /{TENANT_SEGMENT}/"
                    f"TENANT{MCP_PATH} and /{TENANT_SEGMENT}/TENANT/{SCOPE_SEGMENT}/SCOPE"
                    f"{MCP_PATH}")
        return (f"not an endpoint: this server serves {MCP_PATH} and /{SCOPE_SEGMENT}/SCOPE"
                f"{MCP_PATH}")

    async def _endpoint(self, key: Tuple[Optional[str], str]) -> _Endpoint:
        import anyio

        endpoint = self._endpoints.get(key)
        while endpoint is not None:
            await endpoint.ready.wait()
            if endpoint.manager is None:
                raise _HttpError(500, "the endpoint could not be started (see the "
                                      "server's stderr)")
            if self._endpoints.get(key) is endpoint:
                self._endpoints.move_to_end(key)
                return endpoint
            endpoint = self._endpoints.get(key)  # dropped while this request waited
        endpoint = self._endpoints[key] = _Endpoint(key)
        try:
            mcp = await anyio.to_thread.run_sync(self.build, key[0], key[1])
            mcp.streamable_http_app(streamable_http_path=MCP_PATH, host=self.host,
                                    stateless_http=True)
            await self._tg.start(self._run_endpoint, endpoint, mcp.session_manager)
        except BaseException:
            self._endpoints.pop(key, None)
            raise
        finally:
            endpoint.ready.set()
        self._drop_endpoints()
        return endpoint

    @staticmethod
    async def _run_endpoint(endpoint: _Endpoint, manager: Any, *,
                            task_status: Any) -> None:
        async with manager.run():
            endpoint.manager = manager
            task_status.started()
            await endpoint.stop.wait()

    def _drop_endpoints(self) -> None:
        """Drop the least recently used endpoints beyond the bound (none in a request)."""
        excess = len(self._endpoints) - self.max_endpoints
        for key in list(self._endpoints):
            if excess <= 0:
                break
            endpoint = self._endpoints[key]
            if endpoint.inflight == 0 and endpoint.manager is not None:
                del self._endpoints[key]
                endpoint.stop.set()
                excess -= 1


async def _answer(send: Any, status: int, message: str) -> None:
    body = json.dumps({"error": message}).encode("utf-8")
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def _http_app(server: Server, host: str, token: Optional[str], log_level: str) -> Any:
    """The MCP tools over streamable HTTP, one endpoint per scope (S8), behind the bearer
    token when one is given (S6)."""
    from .mcp_server import build_server

    def build(tenant: Optional[str], scope: str) -> Any:
        return build_server(server.store, scope, log_level=log_level, lock=server.lock)

    return HttpRouter(build, host, server.default_scope, token=token)


# ---- per-tenant files (S9) ----

class _Tenant:
    """One tenant: its file, its lock (its tools' calls, one at a time) and its store
    while open."""

    def __init__(self, name: str, path: str) -> None:
        self.name = name
        self.path = path
        self.lock = threading.Lock()
        self.store: Any = None
        self.used = 0.0


class TenantStore:
    """What an endpoint's tools see as their store: the tenant's store, opened when a
    tool first uses it (under the tenant's lock, which the tools hold)."""

    def __init__(self, pool: "TenantPool", tenant: _Tenant) -> None:
        self._pool = pool
        self._tenant = tenant
        self.path = tenant.path

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pool.store(self._tenant), name)


class TenantPool:
    """A directory of memories, one file per tenant (S9): stores opened lazily with the
    one shared ``embedder``, at most ``max_open`` open (least recently used closed
    first), those unused for ``idle_close`` seconds closed by :meth:`close_idle`."""

    def __init__(self, directory: str, embedder: Any = None, *,
                 max_open: int = MAX_OPEN_STORES,
                 idle_close: float = IDLE_CLOSE_SECONDS, create: bool = False) -> None:
        self.directory = directory
        self.embedder = embedder
        self.max_open = max_open
        self.idle_close = idle_close
        self.create = create
        self._lock = threading.Lock()
        self._tenants: Dict[str, _Tenant] = {}
        self._open: "OrderedDict[str, _Tenant]" = OrderedDict()  # least recent first

    def path_of(self, name: str) -> str:
        """The file of tenant ``name`` (a ValueError for a name :data:`TENANT_NAME`
        refuses)."""
        if not TENANT_NAME.fullmatch(name):
            raise ValueError(f"tenant {name!r}: not a tenant's name")
        return os.path.join(self.directory, name + TENANT_SUFFIX)

    def exists(self, name: str) -> bool:
        """Whether tenant ``name`` has a file."""
        return os.path.isfile(self.path_of(name))

    def tenant(self, name: str) -> _Tenant:
        """The tenant ``name`` (its store not opened)."""
        with self._lock:
            t = self._tenants.get(name)
            if t is None:
                t = self._tenants[name] = _Tenant(name, self.path_of(name))
            return t

    def open_count(self) -> int:
        """How many tenants' stores are open."""
        with self._lock:
            return len(self._open)

    def store(self, tenant: _Tenant) -> Any:
        """The tenant's store, opened if it is not; the caller holds ``tenant.lock``."""
        with self._lock:
            tenant.used = time.monotonic()
            if tenant.store is not None:
                self._open.move_to_end(tenant.name)
                return tenant.store
        if not self.create and not os.path.isfile(tenant.path):
            raise UserError(f"tenant {tenant.name!r}: its file no longer exists")
        store = _open_tenant_store(tenant.path, self.embedder)
        with self._lock:
            tenant.store = store
            tenant.used = time.monotonic()
            self._open[tenant.name] = tenant
            self._close_beyond(self.max_open, keep=tenant)
        return store

    def _close_beyond(self, bound: int, keep: Optional[_Tenant] = None,
                      idle_before: Optional[float] = None) -> int:
        """Close the least recently used stores until at most ``bound`` are open (or, with
        ``idle_before``, those unused since then); a store in a call is skipped. Holds
        ``self._lock``."""
        closed = 0
        for name in list(self._open):
            t = self._open[name]
            if idle_before is None and len(self._open) <= bound:
                break
            if idle_before is not None and t.used >= idle_before:
                continue
            if t is keep or not t.lock.acquire(blocking=False):
                continue
            try:
                with contextlib.suppress(Exception):
                    t.store.close()  # the shared model stays loaded
                t.store = None
                del self._open[name]
                closed += 1
            finally:
                t.lock.release()
        return closed

    def trim(self) -> int:
        """Close the least recently used stores beyond ``max_open`` (one in a call stays
        open); how many were closed."""
        with self._lock:
            return self._close_beyond(self.max_open)

    def close_idle(self) -> int:
        """Close the stores unused for ``idle_close`` seconds; how many were closed."""
        with self._lock:
            return self._close_beyond(0, idle_before=time.monotonic() - self.idle_close)

    def close_all(self) -> None:
        """Close every open store (waiting for a call in progress)."""
        for t in list(self._tenants.values()):
            with t.lock:
                if t.store is not None:
                    with contextlib.suppress(Exception):
                        t.store.close()
                    t.store = None
        with self._lock:
            self._open.clear()


def _open_tenant_store(path: str, embedder: Any) -> Any:
    """A tenant's Store with the shared model (without the vector list when the file was
    made with another model, said on stderr)."""
    from .mcp_server import WRITE_PATIENCE_MS
    from .store import Store, StoreError

    store = Store(path)
    try:
        if embedder is not None:
            try:
                store.attach_embedder(embedder, remember=not store.readonly)
            except StoreError as e:
                note(f"{path}: the vector list is off: {e}")
        store.busy_timeout_ms = WRITE_PATIENCE_MS
    except BaseException:
        store.close()
        raise
    return store


def run_tenants(args: argparse.Namespace) -> int:
    """``sqlite-rrf serve --dir DIR --http [HOST:]PORT``: every tenant's memory, one file
    each, until SIGTERM or SIGINT (S9)."""
    from .app import check_model_args, choose_embedder

    directory = args.tenant_dir
    if args.db is not None:
        raise UserError("--dir: serve either one database (DB) or a directory of tenants "
                        "(--dir), not both")
    if getattr(args, "http", None) is None:
        raise UserError("--dir: tenants are served over HTTP only: pass --http [HOST:]PORT")
    if args.socket is not None:
        raise UserError("--socket: a --dir server has no hook socket (the hook asks a "
                        "server of one database)")
    if not os.path.isdir(directory):
        raise UserError(f"--dir: {directory} is not a directory")
    host, port = _parse_http(args.http)
    token = _read_token(args)
    tenant_tokens = read_tenant_tokens(args.tenant_tokens) if args.tenant_tokens else None
    if host not in LOOPBACK and token is None and tenant_tokens is None:
        raise UserError(f"--http: binding {host} (not loopback) needs bearer tokens: "
                        f"--token-file FILE, ${TOKEN_ENV} or --tenant-tokens FILE")
    try:
        import mcp.server.mcpserver  # noqa: F401
        import uvicorn
    except ImportError as e:
        from .mcp_server import INSTALL_HINT

        raise UserError(f"--http needs the MCP Python SDK 2.x: {INSTALL_HINT} ({e})") from None
    check_model_args(getattr(args, "model", None), getattr(args, "n_ctx", None))
    embedder = choose_embedder(getattr(args, "model", None), getattr(args, "n_ctx", None))
    pool = TenantPool(directory, embedder, max_open=args.max_open,
                      idle_close=args.idle_close, create=args.create_tenants)
    default_scope = args.scope if args.scope is not None else ""
    from .mcp_server import build_server

    def build(tenant: Optional[str], scope: str) -> Any:
        assert tenant is not None
        t = pool.tenant(tenant)
        return build_server(TenantStore(pool, t), scope, log_level=args.log_level,
                            lock=t.lock)

    app = HttpRouter(build, host, default_scope, token=token, tenant_tokens=tenant_tokens,
                     tenants=pool)
    model = getattr(embedder, "model_name", None)
    shown = f"[{host}]" if ":" in host else host
    _say(f"serving the tenants of {directory} (MCP at http://{shown}:{port}/"
         f"{TENANT_SEGMENT}/TENANT{MCP_PATH}"
         f"{'; bearer tokens' if token or tenant_tokens else ''}; at most {args.max_open} "
         f"open; {'model ' + model if model else 'no model'}); ready")
    # uvicorn restores these when it stops, then raises the signal it caught again: it
    # lands here, and the server closes its stores
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    try:
        uvicorn.Server(uvicorn.Config(app, host=host, port=port,
                                      log_level=args.log_level.lower(),
                                      lifespan="on")).run()
    finally:
        pool.close_all()
        if embedder is not None and hasattr(embedder, "close"):
            embedder.close()
        note("server stopped")
    return 0


def run(args: argparse.Namespace) -> int:
    """Serve ``args.db`` until SIGTERM or SIGINT."""
    from .app import derive_scope

    if getattr(args, "tenant_dir", None) is not None:
        return run_tenants(args)
    if args.db is None:
        raise UserError("serve: name the database (DB), or a directory of tenants (--dir)")
    for given, option in ((args.create_tenants, "--create-tenants"),
                          (args.tenant_tokens, "--tenant-tokens")):
        if given:
            raise UserError(f"{option}: only with --dir (a server of tenants)")
    http = _parse_http(args.http) if getattr(args, "http", None) else None
    token = _read_token(args)
    if http is not None:
        host = http[0]
        if host not in LOOPBACK and token is None:
            raise UserError(f"--http: binding {host} (not loopback) needs a bearer token: "
                            f"--token-file FILE or ${TOKEN_ENV}")
        try:
            import mcp.server.mcpserver  # noqa: F401
            import uvicorn  # noqa: F401
        except ImportError as e:
            from .mcp_server import INSTALL_HINT

            raise UserError(f"--http needs the MCP Python SDK 2.x: {INSTALL_HINT} ({e})"
                            ) from None
    path = args.socket or socket_path(args.db)
    _prepare_socket(path)
    scope = args.scope if args.scope is not None else derive_scope()
    store = open_store(args.db, "serve", model=getattr(args, "model", None),
                       n_ctx=getattr(args, "n_ctx", None), must_exist=False)
    from .mcp_server import WRITE_PATIENCE_MS

    store.busy_timeout_ms = WRITE_PATIENCE_MS
    server = Server(store, args.db, scope)
    try:
        server.start_touching()
        sock = _SocketServer(path, server)
    except BaseException:
        server.stop_touching()
        from .app import close_store

        close_store(store)
        raise
    stop = threading.Event()
    thread = threading.Thread(target=sock.serve_forever, name="hook-socket", daemon=True)
    thread.start()
    model = getattr(store.embedder, "model_name", None)
    where = f"hook socket {path}"
    # uvicorn restores these when it stops, then raises the signal it caught again: it
    # lands here, and the server closes its socket and store (S2)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        if http is None:
            _say(f"serving {args.db} ({where}; {'model ' + model if model else 'no model'}); "
                 "ready")
            while not stop.wait(3600):
                pass
        else:
            import uvicorn

            host, port = http
            app = _http_app(server, host, token, args.log_level)
            shown = f"[{host}]" if ":" in host else host
            _say(f"serving {args.db} ({where}; MCP at http://{shown}:{port}{MCP_PATH}"
                 f"{' (bearer token)' if token else ''}; "
                 f"{'model ' + model if model else 'no model'}); ready")
            uvicorn.Server(uvicorn.Config(app, host=host, port=port,
                                          log_level=args.log_level.lower(),
                                          lifespan="on")).run()
    finally:
        sock.shutdown()
        sock.server_close()
        with contextlib.suppress(OSError):
            if os.stat(path).st_ino == sock.inode:  # S2: only our own socket
                os.unlink(path)
        server.stop_touching()
        with server.lock:
            from .app import close_store

            close_store(store)
        note("server stopped")
    return 0
