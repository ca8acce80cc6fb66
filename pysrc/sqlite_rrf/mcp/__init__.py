"""``sqlite-rrf mcp DB``: the memory as a Model Context Protocol server over stdio.

Built on the official MCP Python SDK (``pip install 'sqlite-rrf[mcp]'``, ``mcp>=2``), which
this package's modules import only when the server runs: this module (the command's
arguments, its limits, :func:`run`) imports no SDK, so the rest of the command line works
without it. Tools: ``remember``, ``recall``, ``update``, ``forget``, ``stats``; resources:
``memory://stats``, ``memory://recent``.

The rooms:

- :mod:`.build`: the SDK's ``MCPServer`` with strict arguments (M13) and
  :func:`~.build.build_server`, which makes one for an endpoint;
- :mod:`.tools`: the tools and resources, at module level, and the :class:`~.tools.Endpoint`
  they work on (a store, its default scope, its lock);
- :mod:`.outputs`: the tools' structured outputs (pydantic models) and their text (M8,
  M11, M12);
- :mod:`.errors`: faults and bad arguments in the command line's words (M2, M13).

Why a server object per endpoint, not one at module level: the tools, resources, outputs
and errors are module level, as in the SDK's examples, and the store and default scope
reach the tools through the server's ``lifespan`` (the SDK's way: a tool reads
``ctx.request_context.lifespan_context``, an :class:`~.tools.Endpoint`). But one process
serves many endpoints: ``sqlite-rrf serve`` has ``/mcp`` and ``/s/SCOPE/mcp`` on one store,
and ``serve --dir`` a store per tenant (:mod:`sqlite_rrf.serve`, S8, S9), and each
endpoint's tool descriptions and instructions name its own default scope (M12). So
:func:`~.build.build_server` binds the module-level tool set to one store and scope, as
an ``MCPServer`` whose lifespan yields that endpoint, and ``sqlite-rrf mcp`` (stdio) runs
one. The SDK does not pass a context to a resource without URI parameters, so the two
resources are bound to their endpoint when the server is made.

Its requirements, M1–M16, are in docs/contract.md ("The MCP server"); tests/test_mcp.py cites them.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from typing import Any, Iterator

from ..app import UserError, open_store

#: M10: how long ``remember``, ``update`` and ``forget`` wait for another process's write
#: lock (ms) before they fail, nothing written (tools run one at a time, so a recall waits
#: behind a waiting write at most this long).
WRITE_PATIENCE_MS = 2000
#: M11: the longest text ``remember`` and ``update`` take, in characters. Only the first
#: tokens of a text are embedded (the model's context, 256 tokens for the default model,
#: about 1,000 characters of English): the model reads that prefix; BM25 reads it all.
MAX_CONTENT_CHARS = 20000
#: M11: ``recall``'s default ``max_chars``: each hit's text is cut at this many characters.
DEFAULT_RECALL_MAX_CHARS = 2000
#: M13: the most memories one ``recall`` returns (its ``limit``).
MAX_RECALL_LIMIT = 20
#: M14: how many memories the ``memory://recent`` resource shows, and where it cuts each
#: one's text (characters).
RECENT_MEMORIES = 10
RECENT_MAX_CHARS = 300

#: What to install for this command.
INSTALL_HINT = "pip install 'sqlite-rrf[mcp]'"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The server's arguments (the command line adds --model and --n-ctx)."""
    p.add_argument("db", help="the memory database (created if it does not exist)")
    p.add_argument(
        "--scope",
        help="the tools' default scope: remember writes there and "
        "recall searches there unless a call names another ('' is the shared "
        "memory, '*' recalls every scope); default: the name of the top directory of "
        "the git work tree the server starts in, else (outside a project, or in the "
        "home directory) the shared scope",
    )
    p.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        default="WARNING",
        dest="log_level",
        help="the SDK's logging on stderr (default WARNING; INFO logs each failed tool call)",
    )


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """File descriptor 1 points at stderr inside the block (M3)."""
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no stdout at all: nothing to protect
        yield
        return
    try:
        os.dup2(2, 1)
    except OSError:
        os.close(saved)
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def open_served_store(args: argparse.Namespace, defer_model: bool = False) -> Any:
    """The Store with the chosen model (M6); a read-only file is served for recall. With
    ``defer_model`` the model is not loaded yet: :func:`load_model` attaches it."""
    return open_store(
        args.db,
        "serve",
        model=getattr(args, "model", None),
        n_ctx=getattr(args, "n_ctx", None),
        must_exist=False,
        defer_model=defer_model,
    )


def load_model(store: Any, args: argparse.Namespace) -> str:
    """Attach the chosen model to ``store`` (M6) and say what it is, as the start-up
    line's end: ``model NAME`` or ``no embedding model``."""
    from ..app import attach_model

    attach_model(
        store, "serve", model=getattr(args, "model", None), n_ctx=getattr(args, "n_ctx", None)
    )
    model = getattr(store.embedder, "model_spec", None) or getattr(
        store.embedder, "model_name", None
    )
    return f"model {model}" if model else "no embedding model"


def _load_in_background(store: Any, args: argparse.Namespace, lock: Any) -> None:
    """The loader thread of :func:`run`: load the model while the server already answers
    (``initialize``, the tools' list), the endpoint's ``lock`` held so that the first
    tool call waits for the model and uses it. A model that was named and cannot be
    loaded ends the server, as it ends the command line, with the one-line error."""
    import time

    from ..app import error_message, fault_message

    t0 = time.monotonic()
    try:
        said = load_model(store, args)
        store.busy_timeout_ms = WRITE_PATIENCE_MS  # M10
    except BaseException as e:
        # the command line's one line (sqlite_rrf.cli.main)
        if isinstance(e, UserError):
            why = str(e)
        else:
            why = f"{args.db}: {error_message(e) or fault_message(e)}"
        print(f"sqlite-rrf: {why}", file=sys.stderr, flush=True)
        os._exit(1)  # the host sees the server end, as when it could not start
    print(
        f"sqlite-rrf mcp: {said} ({time.monotonic() - t0:.1f} s after start-up)",
        file=sys.stderr,
        flush=True,
    )
    lock.release()


def run(args: argparse.Namespace) -> int:
    """Serve ``args.db`` over stdio until the client closes the connection.

    The wire (:class:`~.early.Wire`) is taken first, so that ``initialize`` is answered
    while the SDK is imported (an answer remembered from an earlier start) and the
    database opened; the model loads on a thread of its own once the server runs, and
    the tools wait for it (:func:`_load_in_background`). A file that is not a database,
    or an SDK that cannot be imported, ends the command with one line, the database
    not created."""
    import importlib.util
    import threading

    from ..app import scope_in_words, server_scope

    if importlib.util.find_spec("mcp") is None:
        raise UserError(f"the mcp command needs the MCP Python SDK 2.x: {INSTALL_HINT}")
    scope = args.scope if args.scope is not None else server_scope()
    from .early import Wire, cache_path

    wire = Wire(scope, cache_path())
    wire.start()
    store = None
    loader = None
    try:
        try:
            import anyio  # noqa: F401
            import pydantic  # noqa: F401
            from mcp.server.mcpserver import MCPServer  # noqa: F401
        except ImportError as e:
            raise UserError(
                f"the mcp command needs the MCP Python SDK 2.x: {INSTALL_HINT} ({e})"
            ) from None
        store = open_served_store(args, defer_model=True)
        store.busy_timeout_ms = 10_000  # the model's first record may wait for a writer
        lock = threading.Lock()
        lock.acquire()  # released by the loader: the tools wait for the model
        loader = threading.Thread(
            target=_load_in_background, args=(store, args, lock), name="model", daemon=True
        )
        from .build import build_server, serve_stdio

        # the loader starts when the server does: after the wire is the server's
        server = build_server(
            store, scope, log_level=args.log_level, lock=lock, on_start=loader.start
        )
        print(
            f"sqlite-rrf mcp: serving {args.db} over stdio "
            f"({scope_in_words(scope, given=args.scope is not None)}; the model loads "
            "while the client connects)",
            file=sys.stderr,
            flush=True,
        )
        serve_stdio(server, wire.server_in, wire.server_out)
    finally:
        if loader is not None and loader.is_alive():
            loader.join()  # before the wire gives fd 1 back: its line goes to stderr
        wire.close()
        if store is not None:
            if store.embedder is not None and hasattr(store.embedder, "close"):
                store.embedder.close()
            store.close()
    return 0
