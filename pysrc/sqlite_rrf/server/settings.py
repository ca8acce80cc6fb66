"""``sqlite-rrf serve``'s limits and names (the requirements are in :mod:`sqlite_rrf.server`)."""

from __future__ import annotations

import re
import sys

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
#: 0.2 MB) the server keeps; the least recently used is dropped first and built again
#: (about 7 ms) when it is asked for.
MAX_ENDPOINTS = 256
LOOPBACK = ("127.0.0.1", "localhost", "::1")


PREFIX = "sqlite-rrf serve"


def say(message: str) -> None:
    """One line on stderr, as the server says it."""
    print(f"{PREFIX}: {message}", file=sys.stderr, flush=True)
