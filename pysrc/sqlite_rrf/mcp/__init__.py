"""``sqlite-rrf mcp DB``: the memory as a Model Context Protocol server over stdio.

Built on the official MCP Python SDK (``pip install 'sqlite-rrf[mcp]'``, ``mcp>=2``), which
this package's modules import only when the server runs: this module (the command's
arguments, its limits, :func:`run`) imports no SDK, so the rest of the command line works
without it. Tools: ``remember``, ``recall``, ``update``, ``forget``, ``stats``; resources:
``memory://stats``, ``memory://recent``.

The rooms:

- :mod:`.server`: the SDK's ``MCPServer`` with strict arguments (M13) and
  :func:`~.server.build_server`, which makes one for an endpoint;
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
and ``serve --dir`` a store per tenant (:mod:`sqlite_rrf.server`, S8, S9), and each
endpoint's tool descriptions and instructions name its own default scope (M12). So
:func:`~.server.build_server` binds the module-level tool set to one store and scope, as
an ``MCPServer`` whose lifespan yields that endpoint, and ``sqlite-rrf mcp`` (stdio) runs
one. The SDK does not pass a context to a resource without URI parameters, so the two
resources are bound to their endpoint when the server is made.

Requirements (tests/test_mcp.py cites them):

M1. Every tool's input schema is typed and every parameter described; the outputs are
    structured (an output schema, ``structured_content``) as well as JSON text.
M2. A fault is an MCP tool error (``is_error``) whose text carries the message the command
    line gives for the same fault (the store's ``field: fault`` messages); the server goes on.
M3. Nothing but the protocol is written to stdout. While the database and the model open,
    file descriptor 1 points at stderr (so llama.cpp and any C library writing to it miss
    the wire); while serving, the SDK's transport does the same, and each tool runs with
    Python's ``sys.stdout`` sent to stderr. Logs and notes go to stderr.
M4. The default scope is ``--scope``, else derived from the server's working directory as
    the hook derives it (:func:`sqlite_rrf.app.derive_scope`), so memories the agent
    remembers are the ones the hook recalls. ``remember`` writes to it and ``recall``
    searches it unless a call names another scope; ``'*'`` recalls every scope (and a
    server started with ``--scope '*'`` remembers into ``''``, the shared memory).
M5. ``recall`` touches its hits and is never held back by the topic gate: an agent's
    explicit recall is answered (the gate, off by default, is for the per-prompt hook).
M5a. ``recall`` returns no hits unless one reaches its ``min_relevance`` argument (default
    :data:`~sqlite_rrf.relevance.DEFAULT_MIN_RELEVANCE`): a query about nothing in the
    memory gets no hits, and ``reason`` says why.
M9. No duplicates (issue 20): ``remember`` without an id stores a text its scope already
    has (the same after normalising case and white space) once: the episode is refreshed
    and its id returned, with ``duplicate`` true. ``recall`` collapses near-duplicates
    into one hit (the newest; ``duplicates`` and ``duplicate_ids`` say what it stands
    for) and ranks the newer of same-thing near-ties first (:mod:`sqlite_rrf.diversify`).
M6. The model is chosen as the command line chooses it (``--model``, ``$SQLITE_RRF_MODEL``,
    the default; the database's own model only when it is one of these); without one the
    server works with the BM25, recency and access lists and says so once on stderr. A
    database that does not exist is created.
M7. One Store serves the tools, one call at a time (the SDK runs tools on worker threads).
    Several servers may share one file: each one's writes are visible to the others'
    recalls (SQLite's WAL; the store's busy timeout).
M8. Nothing from a memory reaches the client's text as a tag: each tool's text content is
    its structured content as JSON with ``<``, ``>``, ``&``, U+2028 and U+2029 written
    ``\\u003c``, ``\\u003e``, ``\\u0026``, ``\\u2028``, ``\\u2029`` (the same JSON
    values; control characters are escaped by JSON itself), and the default scope is
    shown with the hook's escaping (:func:`sqlite_rrf.app.escape`).
M11. Outputs are bounded (issue 21): ``recall`` cuts each hit's text at its ``max_chars``
    argument (default :data:`DEFAULT_RECALL_MAX_CHARS`, at most :data:`MAX_CONTENT_CHARS`)
    and says so (``cut_from``: the whole text's length); the hits' text is in the text
    content only, and the structured content (``structured_content``) carries everything
    else without repeating it. ``remember`` and ``update`` refuse a text longer than
    :data:`MAX_CONTENT_CHARS` with a tool error saying the limit.
M12. Written for the model that reads it (issue 23): the server's instructions and each
    tool's and argument's description are one paragraph of plain words (no docstring
    indentation, no "episode": the tools say "memory") saying when to use the tool:
    ``recall`` before answering and before remembering, ``remember`` for durable facts,
    preferences and decisions, ``update`` for corrections (not a second ``remember``),
    ``forget`` when the user asks. A hit is compact: ``id``, ``text``, ``score`` (rounded),
    ``when`` (ISO 8601 UTC and how long ago, :func:`sqlite_rrf.app.iso_time` and
    :func:`~sqlite_rrf.app.human_age`) and ``scope`` (``shared`` for ``''``); its ranks,
    relevance and the score's parts only with ``explain``. Fields with nothing to say are
    left out, not sent as null.
M13. Strict arguments: an argument a tool does not take is refused (the input schemas say
    ``additionalProperties: false``), a blank ``query`` and a ``limit`` above
    :data:`MAX_RECALL_LIMIT` are refused, and a missing or mistyped argument is said in
    words naming it and what it takes: no validation library's text, URL or class name
    (nor SQLite's binding's: :func:`sqlite_rrf.app.error_message`). An ``id`` that
    exists is refused by ``remember`` with what to do (``update``).
M14. The server advertises only what it has: tools and resources, no prompts. Resources:
    ``memory://stats`` (the ``stats`` tool's answer: counts by scope, oldest and newest
    as ISO 8601 UTC) and ``memory://recent`` (the :data:`RECENT_MEMORIES` memories saved
    last in the scopes a recall covers by default, newest first, compact).
M10. Another process holding the write lock (for minutes) never stalls the server: ``recall``
    answers in its normal time (its touch waits at most 50 ms and is otherwise skipped, said
    in ``warnings``); ``remember``, ``update`` and ``forget`` wait at most
    :data:`WRITE_PATIENCE_MS` and then fail with a tool error saying the write lock was
    held and nothing was written.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from typing import Any, Iterator

from ..app import UserError, derive_scope, open_store

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
        "memory, '*' recalls every scope); default: derived from the working "
        "directory, the name of its git work tree's top directory, else of the "
        "directory",
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


def open_served_store(args: argparse.Namespace) -> Any:
    """The Store with the chosen model (M6); a read-only file is served for recall."""
    return open_store(
        args.db,
        "serve",
        model=getattr(args, "model", None),
        n_ctx=getattr(args, "n_ctx", None),
        must_exist=False,
    )


def run(args: argparse.Namespace) -> int:
    """Serve ``args.db`` over stdio until the client closes the connection."""
    try:
        import anyio  # noqa: F401
        import pydantic  # noqa: F401
        from mcp.server.mcpserver import MCPServer  # noqa: F401
    except ImportError as e:
        raise UserError(
            f"the mcp command needs the MCP Python SDK 2.x: {INSTALL_HINT} ({e})"
        ) from None
    scope = args.scope if args.scope is not None else derive_scope()
    with stdout_to_stderr():
        store = open_served_store(args)
    store.busy_timeout_ms = WRITE_PATIENCE_MS  # M10
    try:
        from .server import build_server

        server = build_server(store, scope, log_level=args.log_level)
        model = getattr(store.embedder, "model_spec", None) or getattr(
            store.embedder, "model_name", None
        )
        print(
            f"sqlite-rrf mcp: serving {args.db} over stdio (default scope {scope!r}, "
            f"{'model ' + str(model) if model else 'no embedding model'})",
            file=sys.stderr,
            flush=True,
        )
        server.run("stdio")
    finally:
        if store.embedder is not None and hasattr(store.embedder, "close"):
            store.embedder.close()
        store.close()
    return 0
