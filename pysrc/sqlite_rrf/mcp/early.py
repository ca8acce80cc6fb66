"""``sqlite-rrf mcp``'s wire (M16, docs/contract.md): stdin and stdout, owned here, so
that ``initialize`` is answered before the MCP SDK has loaded (importing it costs about
1.5 s of CPU, the most of a cold start) and the store and the model are opened.

:class:`Wire` takes the process's stdin and stdout (file descriptor 1 then points at
stderr, so that nothing else writes on the wire: M3) and talks to the SDK's server
through two pipes. Every line the client sends goes to the server, in order; every
line the server writes goes to the client. One exception: when the client's first
message is ``initialize`` and the answer the SDK gave to the same request before is
remembered (:func:`cache_path`: keyed by this package's and the SDK's versions, the
default scope and the protocol version asked for), that answer is sent at once, and
the server's own answer to it, when it comes, is not sent again: it is compared with
the one sent, and remembered in its place when it differs (said on stderr). The first
start with a new version or scope is answered by the SDK, as always.

Standard library only: it runs before the SDK is imported.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import threading
from typing import Any, BinaryIO, Dict, Optional, Tuple

#: How many remembered ``initialize`` answers :func:`cache_path` keeps at most.
CACHE_ENTRIES = 64


def cache_path() -> Optional[str]:
    """Where the SDK's ``initialize`` answers are remembered, beside the notes
    (:func:`sqlite_rrf.app.notes_path`): ``mcp-initialize.json``; None without a home."""
    from ..app import notes_path

    notes = notes_path()
    return None if notes is None else os.path.join(os.path.dirname(notes), "mcp-initialize.json")


def sdk_version() -> str:
    """The installed MCP SDK's version ('' when unknown), read without importing it."""
    try:
        from importlib.metadata import version

        return version("mcp")
    except Exception:
        return ""


def cache_key(scope: str, protocol_version: str) -> str:
    """The key of an ``initialize`` answer: what it depends on."""
    from .. import __version__

    parts = [__version__, sdk_version(), scope, protocol_version]
    return hashlib.sha256(json.dumps(parts).encode("utf-8", "surrogateescape")).hexdigest()[:32]


def _load(path: Optional[str]) -> Dict[str, Any]:
    if path is None:
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def remember(path: Optional[str], key: str, result: Any) -> None:
    """Remember ``result`` under ``key`` (best effort: a file that cannot be written is
    left as it is)."""
    if path is None:
        return
    data = _load(path)
    data.pop(key, None)
    data[key] = result
    while len(data) > CACHE_ENTRIES:
        data.pop(next(iter(data)))
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _flush_stdout() -> None:
    """Flush Python's stdout, if there is one (None when fd 1 was closed at start)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        sys.stdout.flush()


def _initialize_request(line: bytes) -> Optional[Tuple[Any, str]]:
    """(id, protocol version) when ``line`` is a well-formed ``initialize`` request."""
    try:
        msg = json.loads(line)
    except ValueError:
        return None
    if not isinstance(msg, dict) or msg.get("method") != "initialize" or "id" not in msg:
        return None
    params = msg.get("params")
    if not isinstance(params, dict):
        return None
    version, client = params.get("protocolVersion"), params.get("clientInfo")
    if not isinstance(version, str) or not isinstance(params.get("capabilities"), dict):
        return None
    if not isinstance(client, dict) or not isinstance(client.get("name"), str):
        return None
    if isinstance(msg["id"], bool) or not isinstance(msg["id"], (int, str)):
        return None
    return msg["id"], version


class Wire:
    """The stdio wire of one server (see the module's docstring). :meth:`start` takes
    stdin and stdout and starts the two threads; :meth:`server_streams` are the SDK
    server's ends (binary files: its input, its output); :meth:`close` ends the
    server's output, waits for the last lines to reach the client, and gives the
    process its stdin and stdout back."""

    def __init__(self, scope: str, cache: Optional[str] = None) -> None:
        self.scope = scope
        self.cache = cache
        self.pending: Any = None  # the id of the client's initialize, until the SDK answers
        self.early: Any = None  # the answer sent for it before the SDK loaded, or None
        self.key: Optional[str] = None
        self._lock = threading.Lock()

    def start(self) -> None:
        """Take stdin and stdout (a :class:`~sqlite_rrf.app.UserError` when either is
        closed: the protocol has nothing to run on) and start the threads."""
        import fcntl

        from ..app import UserError

        _flush_stdout()
        for fd, said in (
            (0, "stdin is closed: the MCP server reads its client there"),
            (1, "stdout is closed: the MCP server answers its client there"),
        ):
            try:
                os.fstat(fd)
            except OSError:
                raise UserError(said) from None
        try:
            os.fstat(2)
        except OSError:  # no stderr: nowhere, so that no pipe of ours lands on fd 2
            null = os.open(os.devnull, os.O_WRONLY)
            if null != 2:
                os.dup2(null, 2)
                os.close(null)
        # private copies above the standard range, so that nothing lands on fd 0 to 2
        self._in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
        self._out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(2, 1)  # M3: anything else writing to fd 1 writes to stderr
        to_server_r, self._to_server_w = os.pipe()
        self._from_server_r, from_server_w = os.pipe()
        self.server_in: BinaryIO = os.fdopen(to_server_r, "rb")
        self.server_out: BinaryIO = os.fdopen(from_server_w, "wb")
        self._client_out = os.fdopen(self._out, "wb", closefd=False)
        self._reader = threading.Thread(target=self._from_client, name="mcp-in", daemon=True)
        self._writer = threading.Thread(target=self._to_client, name="mcp-out", daemon=True)
        self._reader.start()
        self._writer.start()

    def _send(self, line: bytes) -> None:
        with self._lock:
            try:
                self._client_out.write(line)
                self._client_out.flush()
            except (OSError, ValueError):
                pass

    def _from_client(self) -> None:
        first = True
        with os.fdopen(self._in, "rb") as client, os.fdopen(self._to_server_w, "wb") as server:
            for line in iter(client.readline, b""):
                if first:
                    first = False
                    self._answer_early(line)
                try:
                    server.write(line)
                    server.flush()
                except (OSError, ValueError):  # the server has stopped
                    return

    def _answer_early(self, line: bytes) -> None:
        asked = _initialize_request(line)
        if asked is None:
            return
        rid, version = asked
        self.key = cache_key(self.scope, version)
        result = _load(self.cache).get(self.key)
        self.pending = rid  # set before the request reaches the SDK: no race
        if result is None:
            return  # not remembered: the SDK's answer goes through
        self.early = result
        answer = {"jsonrpc": "2.0", "id": rid, "result": result}
        self._send(json.dumps(answer, ensure_ascii=False, separators=(",", ":")).encode() + b"\n")

    def _to_client(self) -> None:
        with os.fdopen(self._from_server_r, "rb") as server:
            for line in iter(server.readline, b""):
                if self.pending is None or self._passes(line):
                    self._send(line)

    def _passes(self, line: bytes) -> bool:
        """Whether the SDK's ``line`` goes to the client, while its answer to
        ``initialize`` is awaited: not that answer when one was sent already (it is
        remembered in its place when it differs, and said); every answer to
        ``initialize`` is remembered for the next start."""
        try:
            msg = json.loads(line)
        except ValueError:
            return True
        if not isinstance(msg, dict) or "method" in msg or msg.get("id") != self.pending:
            return True
        self.pending = None
        result = msg.get("result")
        if result is None:  # an error: said to a client that has no answer yet
            return self.early is None
        if self.key is not None and result != self.early:
            remember(self.cache, self.key, result)
            if self.early is not None:
                print(
                    "sqlite-rrf mcp: the initialize answer sent before the SDK loaded "
                    "differed from the SDK's; the SDK's is remembered for the next start",
                    file=sys.stderr,
                    flush=True,
                )
        return self.early is None

    def close(self) -> None:
        """End the server's output, let the writer finish, and give fd 0 and 1 back."""
        with contextlib.suppress(OSError, ValueError):
            self.server_out.close()
        self._writer.join(timeout=10)
        with contextlib.suppress(OSError, ValueError):
            self.server_in.close()
        _flush_stdout()
        os.dup2(self._out, 1)
        os.close(self._out)
