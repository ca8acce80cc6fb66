"""``sqlite-rrf serve``: its options and its run, one database (the hook's socket and,
with ``--http``, MCP over HTTP) or a directory of tenants (``--dir``, HTTP only)."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import threading
from typing import Any, Optional, Tuple

from ..app import UserError, note, open_store, socket_path
from ..mcp.http import HttpRouter
from .hook_socket import Server, SocketServer, prepare_socket
from .settings import (
    IDLE_CLOSE_SECONDS,
    LOOPBACK,
    MAX_OPEN_STORES,
    MCP_PATH,
    TENANT_SEGMENT,
    TOKEN_ENV,
    check_token,
    say,
)
from .tenants import TenantPool, TenantStore, read_tenant_tokens


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The server's arguments (cli.py adds --model and --n-ctx)."""
    p.add_argument(
        "db",
        nargs="?",
        help="the memory database (created if it does not exist); or --dir for one file per tenant",
    )
    p.add_argument(
        "--dir",
        metavar="DIR",
        dest="tenant_dir",
        help="serve every tenant's memory in DIR (DIR/TENANT.db) over HTTP "
        "(needs --http) at /t/TENANT/mcp, instead of one database",
    )
    p.add_argument(
        "--create-tenants",
        action="store_true",
        dest="create_tenants",
        help="with --dir: create a tenant's file on its first request (default: "
        "a tenant whose file does not exist is answered 404)",
    )
    p.add_argument(
        "--tenant-tokens",
        metavar="FILE",
        dest="tenant_tokens",
        help="with --dir: each tenant's own bearer token, one 'TENANT TOKEN' "
        "line each (a token: at least 16 characters); a tenant's token opens only its "
        "endpoints",
    )
    p.add_argument(
        "--max-open",
        metavar="N",
        type=positive_int,
        dest="max_open",
        default=MAX_OPEN_STORES,
        help=f"with --dir: tenants' stores kept open at once, the least recently "
        f"used closed first (default {MAX_OPEN_STORES})",
    )
    p.add_argument(
        "--idle-close",
        metavar="SECONDS",
        type=positive_float,
        dest="idle_close",
        default=IDLE_CLOSE_SECONDS,
        help=f"with --dir: close a tenant's store unused this long (default {IDLE_CLOSE_SECONDS})",
    )
    p.add_argument(
        "--socket",
        metavar="PATH",
        help="the hook's Unix socket (default: $XDG_RUNTIME_DIR/sqlite-rrf/"
        "NAME-CRC.sock, else DB.sock beside the database; the hook finds "
        "the default by itself)",
    )
    p.add_argument(
        "--http",
        metavar="[HOST:]PORT",
        help="also serve MCP over streamable HTTP at http://HOST:PORT/mcp (HOST "
        "default 127.0.0.1; another address needs a bearer token)",
    )
    p.add_argument(
        "--token-file",
        metavar="FILE",
        dest="token_file",
        help=f"the HTTP bearer token (at least 16 characters), read from FILE (default: "
        f"${TOKEN_ENV}); needed when --http binds an address other than loopback",
    )
    p.add_argument(
        "--scope",
        help="the MCP tools' default scope (as `sqlite-rrf mcp "
        "--scope`) at /mcp (and /t/TENANT/mcp); /s/SCOPE/mcp serves SCOPE. "
        "Default: the name of the git work tree the server starts in; outside one (or "
        "from the home directory) and with --dir, the shared scope",
    )
    p.add_argument(
        "--log-level",
        choices=("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"),
        default="WARNING",
        dest="log_level",
        help="the MCP SDK's and the HTTP server's logging on stderr (default WARNING)",
    )


def positive_int(text: str) -> int:
    if not text.isascii() or not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return int(text)


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds above 0, got {text!r}")
    return value


def parse_http(text: str) -> Tuple[str, int]:
    """``[HOST:]PORT`` → (host, port); ``[::1]:8080`` for IPv6."""
    host, _, port = text.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if not port.isascii() or not port.isdigit() or not 0 < int(port) < 65536:
        raise UserError(f"--http: expected [HOST:]PORT with a port from 1 to 65535, got {text!r}")
    return host, int(port)


def read_token(args: argparse.Namespace) -> Optional[str]:
    path = getattr(args, "token_file", None)
    if path:
        try:
            with open(path, encoding="utf-8") as f:
                token = f.read().strip()
        except (OSError, UnicodeDecodeError) as e:
            raise UserError(
                f"--token-file: {path}: {getattr(e, 'strerror', None) or 'not UTF-8 text'}"
            ) from None
        if not token:
            raise UserError(f"--token-file: {path} is empty")
        return check_token(token, f"--token-file: {path}")
    token = os.environ.get(TOKEN_ENV, "").strip()
    return check_token(token, f"${TOKEN_ENV}") if token else None


def http_app(server: Server, host: str, token: Optional[str], log_level: str) -> Any:
    """The MCP tools over streamable HTTP, one endpoint per scope (S8), behind the bearer
    token when one is given (S6)."""
    from ..mcp.build import build_server

    def build(tenant: Optional[str], scope: str) -> Any:
        return build_server(server.store, scope, log_level=log_level, lock=server.lock)

    return HttpRouter(build, host, server.default_scope, token=token, hook=server)


def run_tenants(args: argparse.Namespace) -> int:
    """``sqlite-rrf serve --dir DIR --http [HOST:]PORT``: every tenant's memory, one file
    each, until SIGTERM or SIGINT (S9)."""
    from ..app import check_model_args, choose_embedder, scope_name

    directory = args.tenant_dir
    if args.db is not None:
        raise UserError(
            "--dir: serve either one database (DB) or a directory of tenants (--dir), not both"
        )
    if getattr(args, "http", None) is None:
        raise UserError("--dir: tenants are served over HTTP only: pass --http [HOST:]PORT")
    if args.socket is not None:
        raise UserError(
            "--socket: a --dir server has no hook socket (the hook asks a server of one database)"
        )
    if not os.path.isdir(directory):
        raise UserError(f"--dir: {directory} is not a directory")
    host, port = parse_http(args.http)
    token = read_token(args)
    tenant_tokens = read_tenant_tokens(args.tenant_tokens) if args.tenant_tokens else None
    if host not in LOOPBACK and token is None and tenant_tokens is None:
        raise UserError(
            f"--http: binding {host} (not loopback) needs bearer tokens: "
            f"--token-file FILE, ${TOKEN_ENV} or --tenant-tokens FILE"
        )
    try:
        import mcp.server.mcpserver  # noqa: F401
        import uvicorn
    except ImportError as e:
        from ..mcp import INSTALL_HINT

        raise UserError(f"--http needs the MCP Python SDK 2.x: {INSTALL_HINT} ({e})") from None
    check_model_args(getattr(args, "model", None), getattr(args, "n_ctx", None))
    embedder = choose_embedder(getattr(args, "model", None), getattr(args, "n_ctx", None))
    pool = TenantPool(
        directory,
        embedder,
        max_open=args.max_open,
        idle_close=args.idle_close,
        create=args.create_tenants,
    )
    default_scope = args.scope if args.scope is not None else ""
    from ..mcp.build import build_server

    def build(tenant: Optional[str], scope: str) -> Any:
        assert tenant is not None
        t = pool.tenant(tenant)
        return build_server(TenantStore(pool, t), scope, log_level=args.log_level, lock=t.lock)

    app = HttpRouter(
        build, host, default_scope, token=token, tenant_tokens=tenant_tokens, tenants=pool
    )
    model = getattr(embedder, "model_name", None)
    shown = f"[{host}]" if ":" in host else host
    say(
        f"serving the tenants of {directory} (MCP at http://{shown}:{port}/"
        f"{TENANT_SEGMENT}/TENANT{MCP_PATH}"
        f"{'; bearer tokens' if token or tenant_tokens else ''}; default scope "
        f"{scope_name(default_scope)!r}{' (--scope)' if args.scope is not None else ''}; "
        f"at most {args.max_open} open; {'model ' + model if model else 'no model'}); ready"
    )
    # uvicorn restores these when it stops, then raises the signal it caught again: it
    # lands here, and the server closes its stores
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    try:
        uvicorn.Server(
            uvicorn.Config(
                app, host=host, port=port, log_level=args.log_level.lower(), lifespan="on"
            )
        ).run()
    finally:
        pool.close_all()
        if embedder is not None and hasattr(embedder, "close"):
            embedder.close()
        note("server stopped")
    return 0


def run(args: argparse.Namespace) -> int:
    """Serve ``args.db`` until SIGTERM or SIGINT."""
    from ..app import scope_in_words, server_scope

    if getattr(args, "tenant_dir", None) is not None:
        return run_tenants(args)
    if args.db is None:
        raise UserError("serve: name the database (DB), or a directory of tenants (--dir)")
    for given, option in (
        (args.create_tenants, "--create-tenants"),
        (args.tenant_tokens, "--tenant-tokens"),
    ):
        if given:
            raise UserError(f"{option}: only with --dir (a server of tenants)")
    http = parse_http(args.http) if getattr(args, "http", None) else None
    token = read_token(args)
    if http is not None:
        host = http[0]
        if host not in LOOPBACK and token is None:
            raise UserError(
                f"--http: binding {host} (not loopback) needs a bearer token: "
                f"--token-file FILE or ${TOKEN_ENV}"
            )
        try:
            import mcp.server.mcpserver  # noqa: F401
            import uvicorn
        except ImportError as e:
            from ..mcp import INSTALL_HINT

            raise UserError(f"--http needs the MCP Python SDK 2.x: {INSTALL_HINT} ({e})") from None
    path = args.socket or socket_path(args.db)
    prepare_socket(path)
    scope = args.scope if args.scope is not None else server_scope()
    scope_said = scope_in_words(scope, given=args.scope is not None)
    store = open_store(
        args.db,
        "serve",
        model=getattr(args, "model", None),
        n_ctx=getattr(args, "n_ctx", None),
        must_exist=False,
    )
    from ..mcp import WRITE_PATIENCE_MS

    store.busy_timeout_ms = WRITE_PATIENCE_MS
    server = Server(store, args.db, scope)
    try:
        server.start_touching()
        sock = SocketServer(path, server)
    except BaseException:
        server.stop_touching()
        from ..app import close_store

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
            say(
                f"serving {args.db} ({where}; {scope_said}; "
                f"{'model ' + model if model else 'no model'}); ready"
            )
            while not stop.wait(3600):
                pass
        else:
            import uvicorn

            host, port = http
            app = http_app(server, host, token, args.log_level)
            shown = f"[{host}]" if ":" in host else host
            say(
                f"serving {args.db} ({where}; MCP at http://{shown}:{port}{MCP_PATH}"
                f"{' (bearer token)' if token else ''}; {scope_said}; "
                f"{'model ' + model if model else 'no model'}); ready"
            )
            uvicorn.Server(
                uvicorn.Config(
                    app, host=host, port=port, log_level=args.log_level.lower(), lifespan="on"
                )
            ).run()
    finally:
        sock.shutdown()
        sock.server_close()
        with contextlib.suppress(OSError):
            if os.stat(path).st_ino == sock.inode:  # S2: only our own socket
                os.unlink(path)
        server.stop_touching()
        with server.lock:
            from ..app import close_store

            close_store(store)
        note("server stopped")
    return 0
