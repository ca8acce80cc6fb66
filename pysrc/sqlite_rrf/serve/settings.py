"""``sqlite-rrf serve``'s limits and names (the requirements are in :mod:`sqlite_rrf.serve`)."""

from __future__ import annotations

import re
import sys

#: The protocol's version (the ``v`` of every request).
PROTOCOL = 1
#: The longest request line the server reads (a prompt of this size is cut by the store's
#: own query limit long before).
MAX_REQUEST_BYTES = 1 << 20
#: How long the hook's socket waits for a connection's request line, and for the hook to
#: take its answer (seconds); a connection idle longer is closed. The hook sends its
#: request at once and waits 5 s for the answer (``sqlite_rrf.hook.SERVER_TIMEOUT``).
HOOK_IO_TIMEOUT = 5.0
#: At most this many connections to the hook's socket are served at once (one thread
#: each); one more is closed at once, and its hook recalls in its own process.
MAX_HOOK_CONNECTIONS = 32
#: The environment variable that holds the HTTP bearer token (``--token-file`` wins).
TOKEN_ENV = "SQLITE_RRF_TOKEN"
#: The shortest bearer token accepted (``--token-file``, ``$SQLITE_RRF_TOKEN``, each line
#: of ``--tenant-tokens``): 16 characters from a random generator are ~95 bits and more.
MIN_TOKEN_CHARS = 16
#: How to make a good token (said when one is refused).
TOKEN_HINT = "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
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
#: 0.2 MB) the server keeps; the least recently used is dropped first and built again
#: (about 7 ms) when it is asked for.
MAX_ENDPOINTS = 256
LOOPBACK = ("127.0.0.1", "localhost", "::1")


PREFIX = "sqlite-rrf serve"


def check_token(token: str, where: str) -> str:
    """``token`` when it is at least :data:`MIN_TOKEN_CHARS` characters with no white
    space or control character in it; else a :class:`~sqlite_rrf.app.UserError` that
    begins with ``where`` (the option, file and line) and says why."""
    from ..app import UserError

    if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in token):
        raise UserError(f"{where}: a token has no spaces or control characters")
    if len(token) < MIN_TOKEN_CHARS:
        raise UserError(
            f"{where}: the token has {len(token)} characters; at least "
            f"{MIN_TOKEN_CHARS} are needed (make one with: {TOKEN_HINT})"
        )
    return token


def say(message: str) -> None:
    """One line on stderr, as the server says it."""
    print(f"{PREFIX}: {message}", file=sys.stderr, flush=True)
