"""The hook's Unix socket and the warm process behind it (S1-S5): one Store, one lock,
the hook's requests answered as ``sqlite-rrf hook`` answers them in its own process
(:mod:`sqlite_rrf.app.prompt_recall`), the touches after the answers."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import socket
import socketserver
import stat
import struct
import threading
from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple

from ..app import UserError, error_message, fault_message
from .settings import HOOK_IO_TIMEOUT, MAX_HOOK_CONNECTIONS, MAX_REQUEST_BYTES, PROTOCOL

if TYPE_CHECKING:
    from ..store import Store


def prepare_socket(path: str) -> None:
    """Make the socket's directory (mode 0700 under the runtime directory, or the private
    directory of :mod:`sqlite_rrf.app.sockets`) and clear a stale socket file of this
    user (S2). A file of another user at ``path`` is said for what it is."""
    d = os.path.dirname(path) or "."
    from ..app import RUNTIME_SUBDIR
    from ..app.sockets import foreign_owner, is_private_dir

    private = os.path.basename(d) == RUNTIME_SUBDIR or is_private_dir(d)
    if private and not os.path.isdir(d):
        os.mkdir(d, 0o700)
    if private:
        st = os.lstat(d)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise UserError(
                f"{d}: the socket directory must be a directory of yours with mode 0700 "
                f"(it is owned by uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):04o}); "
                "remove it, or pass --socket"
            )
    if len(os.fsencode(path)) > 107:
        raise UserError(
            f"--socket: {path} is too long for a Unix socket (at most 107 "
            "bytes); pass a shorter --socket"
        )
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    owner = foreign_owner(path)
    if not stat.S_ISSOCK(st.st_mode):
        whose = f" (it belongs to uid {owner})" if owner is not None else ""
        raise UserError(
            f"{path} exists and is not a socket{whose}; it is left alone (pass another --socket)"
        )
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(2)
    try:
        probe.connect(path)
    except (ConnectionRefusedError, FileNotFoundError):
        probe.close()
        try:
            os.unlink(path)  # stale: its server is gone
        except PermissionError:
            raise UserError(
                f"{path} is a stale socket of uid {owner} that this user cannot remove "
                "(a shared directory); pass --socket in a directory of yours, or set "
                "XDG_RUNTIME_DIR"
            ) from None
        return
    except PermissionError:
        probe.close()
        raise UserError(
            f"{path} is a socket of another user (uid {owner}) that this user may not "
            "connect to: not a server of yours (a stale or planted file in a shared "
            "directory). Pass --socket in a directory of yours, or set XDG_RUNTIME_DIR"
        ) from None
    except OSError:
        pass
    finally:
        probe.close()
    raise UserError(
        f"another server already listens at {path}; stop it first, or pass another --socket"
    )


class _Handler(socketserver.StreamRequestHandler):
    """One hook connection: one request line, one answer line (S3), each within
    :data:`~sqlite_rrf.serve.settings.HOOK_IO_TIMEOUT` seconds."""

    server: "SocketServer"
    timeout = HOOK_IO_TIMEOUT  # socketserver sets it on the connection

    def handle(self) -> None:
        srv = self.server
        if not srv.peer_allowed(self.connection):
            return
        try:
            line = self.rfile.readline(MAX_REQUEST_BYTES + 1)
        except OSError:  # idle past the time-out, or gone
            return
        after = None
        try:
            if len(line) > MAX_REQUEST_BYTES:
                raise UserError(f"request longer than {MAX_REQUEST_BYTES} bytes")
            try:
                req = json.loads(line)
            except ValueError:
                raise UserError("request is not a JSON line") from None
            except RecursionError:
                raise UserError(
                    "request is nested too deeply (a hook request is one flat JSON object)"
                ) from None
            if not isinstance(req, dict) or req.get("v") != PROTOCOL:
                raise UserError(f'expected a JSON object with "v": {PROTOCOL}')
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


class SocketServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    block_on_close = False

    def __init__(
        self, path: str, serve: "Server", max_connections: int = MAX_HOOK_CONNECTIONS
    ) -> None:
        self.app = serve
        self._slots = threading.BoundedSemaphore(max_connections)
        old = os.umask(0o177)
        try:
            super().__init__(path, _Handler)
        finally:
            os.umask(old)
        os.chmod(path, 0o600)  # S1
        self.inode = os.stat(path).st_ino

    def process_request(self, request: Any, client_address: Any) -> None:
        """One thread per connection, at most ``max_connections`` at once: one more is
        closed at once (its hook recalls in its own process)."""
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def peer_allowed(self, conn: socket.socket) -> bool:
        """S1: only the server's own user (and root) may ask."""
        opt = getattr(socket, "SO_PEERCRED", None)
        if opt is None:
            return True
        try:
            _, uid, _ = struct.unpack(
                "3i", conn.getsockopt(socket.SOL_SOCKET, opt, struct.calcsize("3i"))
            )
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

    def __init__(self, store: Store, db: str, default_scope: str) -> None:
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
        from ..store import Store

        self._toucher = Store(self.db)
        self._touch_thread = threading.Thread(target=self._touch_loop, name="touch", daemon=True)
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
        from .. import __version__

        op = req.get("op")
        if op == "ping":
            return {
                "ok": True,
                "db": self.real_db,
                "pid": os.getpid(),
                "version": __version__,
            }, None
        if op != "hook":
            raise UserError(f"unknown op {op!r} (expected 'hook' or 'ping')")
        if req.get("db") != self.real_db:
            return {
                "ok": False,
                "wrong_db": True,
                "error": f"this server serves {self.real_db}",
            }, None
        from ..app.prompt_recall import check_request, respond

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
