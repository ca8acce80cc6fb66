"""``sqlite-rrf serve DB``: one warm process that keeps the model, the connection and its
prepared statements, and serves every way in.

- The prompt hook over a Unix socket (:func:`sqlite_rrf.app.socket_path`: under
  ``$XDG_RUNTIME_DIR/sqlite-rrf/``, else ``DB.sock`` beside the database; ``--socket``
  chooses another). ``sqlite-rrf hook DB`` asks the server when one listens there and
  recalls in its own process otherwise.
- MCP over streamable HTTP (``--http [HOST:]PORT``, the SDK's transport at ``/mcp``),
  the same tools as ``sqlite-rrf mcp`` (stdio), built by the same code
  (:func:`sqlite_rrf.mcp_server.build_server`).

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
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import signal
import socket
import socketserver
import stat
import struct
import sys
import threading
from typing import Any, Dict, Optional, Tuple

from .app import (UserError, error_message, fault_message, note, open_store, socket_path)

#: The protocol's version (the ``v`` of every request).
PROTOCOL = 1
#: The longest request line the server reads (a prompt of this size is cut by the store's
#: own query limit long before).
MAX_REQUEST_BYTES = 1 << 20
#: The environment variable that holds the HTTP bearer token (``--token-file`` wins).
TOKEN_ENV = "SQLITE_RRF_TOKEN"
#: The HTTP endpoint's path.
MCP_PATH = "/mcp"
LOOPBACK = ("127.0.0.1", "localhost", "::1")

_PREFIX = "sqlite-rrf serve"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The server's arguments (cli.py adds --model and --n-ctx)."""
    p.add_argument("db", help="the memory database (created if it does not exist)")
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
                   "--scope`); default: derived from the working directory")
    p.add_argument("--log-level", choices=("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"),
                   default="WARNING", dest="log_level",
                   help="the MCP SDK's and the HTTP server's logging on stderr (default "
                        "WARNING)")


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


def _http_app(server: Server, host: str, token: Optional[str], log_level: str) -> Any:
    """The MCP tools as a streamable-HTTP ASGI app, behind the bearer token when one is
    given (S6)."""
    from .mcp_server import build_server

    mcp = build_server(server.store, server.default_scope, log_level=log_level,
                       lock=server.lock)
    app = mcp.streamable_http_app(streamable_http_path=MCP_PATH, host=host)
    if token is None:
        return app
    import hmac

    expected = f"Bearer {token}".encode("utf-8")

    async def guarded(scope: Dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            got = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(got, expected):
                body = b'{"error": "unauthorized: send Authorization: Bearer TOKEN"}'
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"www-authenticate", b'Bearer realm="sqlite-rrf"'),
                                        (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await app(scope, receive, send)

    return guarded


def run(args: argparse.Namespace) -> int:
    """Serve ``args.db`` until SIGTERM or SIGINT."""
    from .app import derive_scope

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
