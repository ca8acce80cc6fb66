"""``sqlite-rrf serve DB``: one warm process that keeps the model, the connection and its
prepared statements, and serves every way in.

- The prompt hook over a Unix socket (:func:`sqlite_rrf.app.socket_path`: under
  ``$XDG_RUNTIME_DIR/sqlite-rrf/``, else ``DB.sock`` beside the database; ``--socket``
  chooses another). ``sqlite-rrf hook DB`` asks the server when one listens there and
  recalls in its own process otherwise.
- MCP over streamable HTTP (``--http [HOST:]PORT``, the SDK's transport at ``/mcp``, and
  at ``/s/SCOPE/mcp`` for each scope, S8), the same tools as ``sqlite-rrf mcp`` (stdio),
  built by the same code (:func:`sqlite_rrf.mcp.build.build_server`).
- With ``--http``, the prompt hook over HTTP too: Claude Code's ``"type": "http"`` hook
  POSTs the hook's JSON to ``/hook`` and gets what ``sqlite-rrf hook DB --format json``
  prints (S10, in :mod:`sqlite_rrf.mcp.http`); no process per prompt.

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
    output to print, :func:`sqlite_rrf.app.prompt_recall.respond`) or ``{"ok": false, "error": …}``.
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

The rooms: :mod:`.settings` (the limits and names above), :mod:`.hook_socket` (the hook's
socket and the warm process, S1-S5), :mod:`~sqlite_rrf.mcp.http` (MCP over HTTP: endpoints by
URL, bearer tokens, S6, S8; the prompt hook over HTTP, S10; a client gone mid-request, S11),
:mod:`.tenants` (per-tenant files, S9), :mod:`.command` (``sqlite-rrf serve``'s options and
its run). An HTTP endpoint is an MCP server of
:mod:`sqlite_rrf.mcp` bound to its store and scope (:func:`sqlite_rrf.mcp.build.build_server`),
imported when the first request for it comes.
"""

from ..mcp.http import HttpRouter, route
from .command import add_arguments, run, run_tenants
from .hook_socket import Server, SocketServer, prepare_socket
from .settings import (
    IDLE_CLOSE_SECONDS,
    LOOPBACK,
    MAX_ENDPOINTS,
    MAX_OPEN_STORES,
    MAX_REQUEST_BYTES,
    MCP_PATH,
    PROTOCOL,
    SCOPE_SEGMENT,
    TENANT_NAME,
    TENANT_SEGMENT,
    TENANT_SUFFIX,
    TOKEN_ENV,
)
from .tenants import TenantPool, TenantStore, read_tenant_tokens

__all__ = [
    "IDLE_CLOSE_SECONDS",
    "LOOPBACK",
    "MAX_ENDPOINTS",
    "MAX_OPEN_STORES",
    "MAX_REQUEST_BYTES",
    "MCP_PATH",
    "PROTOCOL",
    "SCOPE_SEGMENT",
    "TENANT_NAME",
    "TENANT_SEGMENT",
    "TENANT_SUFFIX",
    "TOKEN_ENV",
    "HttpRouter",
    "Server",
    "SocketServer",
    "TenantPool",
    "TenantStore",
    "add_arguments",
    "prepare_socket",
    "read_tenant_tokens",
    "route",
    "run",
    "run_tenants",
]
