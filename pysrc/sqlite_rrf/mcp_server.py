"""``sqlite-rrf mcp DB``: the memory as a Model Context Protocol server over stdio.

Built on the official MCP Python SDK (``pip install 'sqlite-rrf[mcp]'``, ``mcp>=2``), which
this module imports only when the server runs, so the rest of the command line works
without it. Tools: ``remember``, ``recall``, ``forget``, ``update``, ``stats``.

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
    and says so (``truncated``, ``content_chars``); the hits' text is in the text content
    only, and the structured content (``structured_content``) carries everything else
    without repeating it. ``remember`` and ``update`` refuse a text longer than
    :data:`MAX_CONTENT_CHARS` with a tool error saying the limit.
M10. Another process holding the write lock (for minutes) never stalls the server: ``recall``
    answers in its normal time (its touch waits at most 50 ms and is otherwise skipped, said
    in ``warnings``); ``remember``, ``update`` and ``forget`` wait at most
    :data:`WRITE_PATIENCE_MS` and then fail with a tool error saying the write lock was
    held and nothing was written.
"""

# No `from __future__ import annotations`: the SDK reads the tools' annotations, which
# name classes local to build_server, as objects.
import argparse
import contextlib
import os
import sys
from typing import Any, Iterator

from .app import (ALL_SCOPES, UserError, derive_scope, error_message, escape,
                  fault_message, open_store, parse_time)
from .app import recall_scopes, stored_scope

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

#: What to install for this command.
INSTALL_HINT = "pip install 'sqlite-rrf[mcp]'"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The server's arguments (cli.py adds --model and --n-ctx)."""
    p.add_argument("db", help="the memory database (created if it does not exist)")
    p.add_argument("--scope", help="the tools' default scope: remember writes there and "
                   "recall searches there unless a call names another ('' is the shared "
                   "memory, '*' recalls every scope); default: derived from the working "
                   "directory, the name of its git work tree's top directory, else of the "
                   "directory")
    p.add_argument("--log-level", choices=LOG_LEVELS, default="WARNING", dest="log_level",
                   help="the SDK's logging on stderr (default WARNING; INFO logs each "
                        "failed tool call)")


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
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


def _open_store(args: argparse.Namespace) -> Any:
    """The Store with the chosen model (M6); a read-only file is served for recall."""
    return open_store(args.db, "serve", model=getattr(args, "model", None),
                      n_ctx=getattr(args, "n_ctx", None), must_exist=False)


def run(args: argparse.Namespace) -> int:
    """Serve ``args.db`` over stdio until the client closes the connection."""
    try:
        import anyio  # noqa: F401
        import pydantic  # noqa: F401
        from mcp.server.mcpserver import MCPServer  # noqa: F401
    except ImportError as e:
        raise UserError(f"the mcp command needs the MCP Python SDK 2.x: {INSTALL_HINT} "
                           f"({e})") from None
    scope = args.scope if args.scope is not None else derive_scope()
    with _stdout_to_stderr():
        store = _open_store(args)
    store.busy_timeout_ms = WRITE_PATIENCE_MS  # M10
    try:
        server = build_server(store, scope, log_level=args.log_level)
        model = getattr(store.embedder, "model_spec", None) or getattr(
            store.embedder, "model_name", None)
        print(f"sqlite-rrf mcp: serving {args.db} over stdio (default scope {scope!r}, "
              f"{'model ' + str(model) if model else 'no embedding model'})",
              file=sys.stderr, flush=True)
        server.run("stdio")
    finally:
        if store.embedder is not None and hasattr(store.embedder, "close"):
            store.embedder.close()
        store.close()
    return 0


def build_server(store: Any, default_scope: str, log_level: str = "WARNING",
                 lock: Any = None) -> Any:
    """An ``MCPServer`` whose tools work on ``store``; ``default_scope`` as in M4;
    ``lock`` (default: a lock of its own) serialises the tools' calls with the store's
    other users (``sqlite-rrf serve``'s hook socket)."""
    import json
    import logging
    import threading
    import typing
    from typing import Dict, List, Optional, Union

    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp_types import CallToolResult, TextContent, ToolAnnotations
    from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

    from . import __version__
    from .relevance import DEFAULT_MIN_RELEVANCE
    from .statements import recall_defaults
    from .store import IMPORTANCE, PROFILES, StoreError

    defaults = recall_defaults()

    Annotated = typing.Annotated
    log = logging.getLogger("sqlite_rrf.mcp")
    lock = threading.Lock() if lock is None else lock
    write_scope = "" if default_scope == ALL_SCOPES else stored_scope(default_scope, "--scope")
    shown_scope = escape(repr(default_scope))  # M8
    read_scope = "every scope" if default_scope == ALL_SCOPES else shown_scope

    def as_result(out: BaseModel) -> CallToolResult:
        """A tool's result: its structured content, and as text that JSON with no
        tag-like text (M8); a recollection's text also holds each hit's ``content``,
        which its structured content does not repeat (M11)."""
        data = out.model_dump(mode="json")
        texts = getattr(out, "_texts", None)
        shown = data
        if texts is not None:
            shown = dict(data, hits=[{"id": h["id"], "content": t,
                                      **{k: v for k, v in h.items() if k != "id"}}
                                     for h, t in zip(data["hits"], texts)])
        text = json.dumps(shown, indent=2, ensure_ascii=False)
        for ch in "<>&\u2028\u2029":  # never outside a JSON string: the same values
            text = text.replace(ch, f"\\u{ord(ch):04x}")
        return CallToolResult(content=[TextContent(type="text", text=text)],
                              structured_content=data)

    def call(tool: str, fn: Any) -> Any:
        """Run ``fn`` on the store: one call at a time (M7), stdout to stderr (M3), faults
        as tool errors with the CLI's messages (M2); the result as in M8."""
        with lock, contextlib.redirect_stdout(sys.stderr):
            try:
                return as_result(fn())
            except ToolError:
                raise
            except (UserError, StoreError, ValueError) as e:
                raise ToolError(str(e)) from None
            except Exception as e:
                known = error_message(e)
                if known is not None:
                    raise ToolError(f"{store.path}: {known}") from None
                log.exception("tool %s failed", tool)
                raise ToolError(f"{fault_message(e)} (the traceback is on the server's "
                                "stderr)") from None

    def bounded(content: str) -> str:
        """M11: a text no longer than MAX_CONTENT_CHARS."""
        if isinstance(content, str) and len(content) > MAX_CONTENT_CHARS:
            raise ToolError(f"content: {len(content)} characters, more than the "
                            f"{MAX_CONTENT_CHARS} a memory may hold; split it into "
                            "self-contained memories (only the first tokens of each are "
                            "embedded); nothing was written")
        return content

    def one_scope(scope: str) -> str:
        try:
            return stored_scope(scope)
        except UserError as e:
            raise ToolError(str(e)) from None

    def time_ms(value: Union[int, str, None], name: str) -> Optional[int]:
        return None if value is None else parse_time(str(value), name)

    # Choices and bounds are in the schemas (enum, minimum) for clients to see; the store
    # enforces them, with the command line's messages (M2).

    class Remembered(BaseModel):
        id: str = Field(description="the episode's id")
        scope: str = Field(description="the scope it was stored in")
        embedded: bool = Field(description="whether it was embedded (false: no model; "
                                           "BM25, recency and access still find it)")
        duplicate: bool = Field(
            default=False,
            description="true: the scope already had this text (the same after normalising "
                        "case and white space), so no copy was stored; that episode was "
                        "refreshed and its id is returned")

    class Hit(BaseModel):
        id: str = Field(description="the episode's id (its text, cut at max_chars, is "
                                    "this hit's content in the tool's text content, not "
                                    "repeated here)")
        content_chars: int = Field(description="the length of the episode's whole text")
        truncated: bool = Field(description="whether the text content cut its text at "
                                            "max_chars")
        score: float = Field(description="the fused score (higher is better)")
        importance: str = Field(description="low, normal or high")
        bm25_rank: Optional[int] = Field(description="rank in the BM25 list (1 = best); "
                                                     "null: the text did not match")
        vec_rank: Optional[int] = Field(description="rank in the vector list; null: not "
                                                    "in it (no model, or outside the pool)")
        recency_rank: Optional[int] = Field(description="rank by last access")
        access_rank: Optional[int] = Field(description="rank by access count")
        similarity: Optional[float] = Field(description="cosine with the query's embedding")
        relevance: Optional[float] = Field(
            default=None, description="how likely it is to be about the query, 0 to 1, the "
                                      "same scale for every query")
        created_at: int = Field(description="ms since the epoch")
        accessed_at: int = Field(description="ms since the epoch, before this recall")
        access_count: int = Field(description="recalls that returned it, before this one")
        duplicates: int = Field(
            default=0, description="how many near-duplicates of this recall it stands for "
                                   "(it is the newest of them; they fill no other slot)")
        duplicate_ids: List[str] = Field(
            default_factory=list, description="the ids of those near-duplicates")
        explain: Optional[Dict[str, Any]] = Field(
            default=None, description="each list's contribution (when explain was asked)")

    class Recollection(BaseModel):
        _texts: Optional[List[str]] = PrivateAttr(default=None)  # M11: the text content's
        hits: List[Hit] = Field(description="best first")
        scope: Optional[str] = Field(description="the scope searched; null: every scope")
        warnings: List[str] = Field(description="what the recall could not do (e.g. touch "
                                                "a read-only database)")
        reason: Optional[str] = Field(
            default=None, description="why there are no hits, when none reached "
                                      "min_relevance")

    class EpisodeOut(BaseModel):
        id: str
        content: str
        scope: str
        kind: Optional[str]
        importance: str
        metadata: Optional[Any] = Field(description="the JSON stored with it")
        created_at: int = Field(description="ms since the epoch")
        accessed_at: int = Field(description="ms since the epoch")
        access_count: int
        embedded: bool = Field(description="whether it has an embedding")

    class Forgotten(BaseModel):
        id: str
        existed: bool = Field(description="false: there was no episode with this id")

    class Stats(BaseModel):
        model_config = ConfigDict(extra="allow")  # and the rest of Store.stats()
        path: str = Field(description="the database file")
        episodes: int
        with_embedding: int = Field(description="episodes that have an embedding")
        by_scope: Dict[str, int] = Field(description="episodes per scope")
        by_importance: Dict[str, int]
        embedding_model: Optional[str] = Field(description="the database's model")
        embedding_dim: Optional[int]
        schema_version: int
        model: Optional[str] = Field(description="the model this server embeds with; "
                                                 "null: none (BM25, recency, access)")
        default_scope: str = Field(description="the server's default scope")
        version: str = Field(description="sqlite-rrf's version")

    def episode_out(ep: Any) -> EpisodeOut:
        d = ep.as_dict()
        d["embedded"] = d.pop("embedding") is not None
        d.pop("rowid")
        return EpisodeOut(**d)

    ScopeArg = Annotated[Optional[str], Field(
        description=f"the memory to use: a project, a user; '' is the shared memory. "
                    f"Default: the server's scope ({shown_scope})")]
    IdArg = Annotated[str, Field(description="the episode's id (as remember or recall "
                                             "returned it)")]
    KindArg = Annotated[Optional[str], Field(
        description="free text classifying the episode, e.g. fact, decision, preference, "
                    "todo")]
    MetadataArg = Annotated[Optional[Dict[str, Any]], Field(
        description="any JSON object stored with the episode (not searched)")]

    instructions = (
        "Long-term memory in one SQLite file (sqlite-rrf). `remember` stores a fact, "
        "decision or preference worth keeping across sessions; `recall` finds the stored "
        "episodes that best match a query (full-text BM25, embedding similarity, recency "
        "and use, fused); `update` corrects one, `forget` deletes one, `stats` describes "
        f"the memory. The default scope is {shown_scope}"
        + (" (every scope for recall, '' for remember)." if default_scope == ALL_SCOPES
           else ": pass scope to use another, '' for the shared memory, '*' to recall "
                "every scope."))

    server = MCPServer("sqlite-rrf", version=__version__, instructions=instructions,
                       log_level=log_level)  # type: ignore[arg-type]

    @server.tool(annotations=ToolAnnotations(title="Remember", destructive_hint=False))
    def remember(
        content: Annotated[str, Field(
            description=f"the text to remember, self-contained (it is found again by its "
                        f"words and meaning), at most {MAX_CONTENT_CHARS} characters. Put "
                        f"the gist first: only the first tokens are embedded (the model's "
                        f"context, 256 tokens for the default model, about 1,000 characters "
                        f"of English); the full-text index reads all of it",
            json_schema_extra={"maxLength": MAX_CONTENT_CHARS})],
        scope: ScopeArg = None,
        kind: KindArg = None,
        importance: Annotated[str, Field(
            description="low, normal or high; high ranks it higher in recall",
            json_schema_extra={"enum": list(IMPORTANCE)})] = "normal",
        metadata: MetadataArg = None,
        id: Annotated[Optional[str], Field(
            description="the episode's id; default: a new one. An id that exists is an "
                        "error (use update)")] = None,
    ) -> Remembered:
        """Store an episode in the memory; returns its id. A text the scope already has
        (the same after normalising case and white space) is not stored twice: that
        episode is refreshed and its id returned (``duplicate`` is true)."""
        s = write_scope if scope is None else one_scope(scope)
        bounded(content)

        def go() -> Remembered:
            ids = store.add_many([dict(content=content, id=id, importance=importance,
                                       kind=kind, metadata=metadata, scope=s)])
            return Remembered(id=ids[0], scope=s, embedded=store.embedder is not None,
                              duplicate=bool(ids.duplicates))

        return call("remember", go)

    @server.tool(annotations=ToolAnnotations(title="Recall", read_only_hint=False,
                                             destructive_hint=False, idempotent_hint=False))
    def recall(
        query: Annotated[str, Field(description="what to look for, in words")],
        limit: Annotated[int, Field(
            description=f"how many episodes (default {defaults['result_limit']})",
            json_schema_extra={"minimum": 1})] = defaults["result_limit"],
        scope: Annotated[Optional[str], Field(
            description=f"only this scope; '' is the shared memory, '*' every scope. "
                        f"Default: the server's scope ({read_scope})")] = None,
        kind: Annotated[Optional[str], Field(description="only episodes of this kind")] = None,
        since: Annotated[Union[int, str, None], Field(
            description="only episodes created at or after this time: ms since the epoch, "
                        "or an ISO 8601 date/time such as 2026-11-24 or 2026-11-24T09:30 "
                        "(UTC unless it names a zone)")] = None,
        until: Annotated[Union[int, str, None], Field(
            description="only episodes created before this time (as since)")] = None,
        profile: Annotated[Optional[str], Field(
            description=f"the fusion profile, one of {', '.join(PROFILES)} (default "
                        f"{defaults['profile']})", json_schema_extra={"enum": [*PROFILES, None]})] = None,
        explain: Annotated[bool, Field(
            description="include each list's contribution to the score")] = False,
        max_chars: Annotated[int, Field(
            description=f"cut each hit's text at this many characters (default "
                        f"{DEFAULT_RECALL_MAX_CHARS}, at most {MAX_CONTENT_CHARS})",
            json_schema_extra={"minimum": 1, "maximum": MAX_CONTENT_CHARS}
        )] = DEFAULT_RECALL_MAX_CHARS,
        min_relevance: Annotated[float, Field(
            description=f"return nothing unless an episode's relevance (0 to 1, the same "
                        f"scale for every query) is at least this (default "
                        f"{DEFAULT_MIN_RELEVANCE:g}; 0: always answer)",
            json_schema_extra={"minimum": 0, "maximum": 1})] = DEFAULT_MIN_RELEVANCE,
    ) -> Recollection:
        """The stored episodes that best match the query, best first, each with its
        score, its relevance and its rank in each list (BM25, vector, recency, access);
        none when no episode reaches min_relevance. The episodes returned are marked as
        used (their access count goes up)."""
        try:  # the project's scope and the shared one, unless a scope is named
            store_scope = recall_scopes(scope, default_scope)
        except UserError as e:
            raise ToolError(str(e)) from None

        def go() -> Recollection:
            since_ms, until_ms = time_ms(since, "since"), time_ms(until, "until")
            result = store.recall(query, limit=limit, scope=store_scope, kind=kind,
                                  since=since_ms, until=until_ms, profile=profile,
                                  force=True, min_relevance=min_relevance)
            if isinstance(max_chars, bool) or not 1 <= max_chars <= MAX_CONTENT_CHARS:
                raise ToolError(f"max_chars: must be from 1 to {MAX_CONTENT_CHARS}, got "
                                f"{max_chars}")
            hits, texts = [], []
            for h in result:
                text = str(h.content)
                d = {k: getattr(h, k) for k in Hit.model_fields
                     if k not in ("explain", "content_chars", "truncated")}
                hits.append(Hit(**d, content_chars=len(text), truncated=len(text) > max_chars,
                                explain=h.explain if explain else None))
                texts.append(text if len(text) <= max_chars else text[:max_chars] + " …")
            warnings = list(result.warnings)
            if result.touch_error:
                warnings.append(result.touch_error)
            out = Recollection(hits=hits, scope=store_scope, warnings=warnings,
                               reason=result.reason)
            out._texts = texts  # M11: the text content's, not the structured content's
            return out

        return call("recall", go)

    @server.tool(annotations=ToolAnnotations(title="Forget", destructive_hint=True,
                                             idempotent_hint=True))
    def forget(id: IdArg) -> Forgotten:
        """Delete the episode; says whether it existed."""
        return call("forget", lambda: Forgotten(id=id, existed=store.delete(id)))

    @server.tool(annotations=ToolAnnotations(title="Update", destructive_hint=True,
                                             idempotent_hint=True))
    def update(
        id: IdArg,
        content: Annotated[Optional[str], Field(
            description="the new text (it is embedded again; the old text no longer "
                        "matches). Default: unchanged")] = None,
        importance: Annotated[Optional[str], Field(
            description="low, normal or high. Default: unchanged",
            json_schema_extra={"enum": [*IMPORTANCE, None]})] = None,
        kind: Annotated[Optional[str], Field(
            description="the new kind; '' clears it. Default: unchanged")] = None,
        metadata: Annotated[Optional[Dict[str, Any]], Field(
            description="the new metadata (replaces the old). Default: unchanged")] = None,
        scope: Annotated[Optional[str], Field(
            description="move it to this scope. Default: unchanged")] = None,
    ) -> EpisodeOut:
        """Change some fields of an episode; returns the episode as it now is."""
        fields: Dict[str, Any] = {}
        if content is not None:
            fields["content"] = bounded(content)
        if importance is not None:
            fields["importance"] = importance
        if kind is not None:
            fields["kind"] = kind or None
        if metadata is not None:
            fields["metadata"] = metadata
        if scope is not None:
            fields["scope"] = one_scope(scope)
        return call("update", lambda: episode_out(store.update(id, **fields)))

    @server.tool(annotations=ToolAnnotations(title="Memory statistics", read_only_hint=True))
    def stats() -> Stats:
        """Counts and facts about the memory: episodes (by scope and importance), how many
        have embeddings, the model, the schema version, the server's default scope."""
        def go() -> Stats:
            st = store.stats()
            st["by_scope"] = dict(store.conn.execute(
                "SELECT scope, count(*) FROM episodes GROUP BY scope ORDER BY scope"
            ).fetchall())
            emb = store.embedder
            st["model"] = (getattr(emb, "model_spec", None) or getattr(emb, "model_name", None)
                           if emb is not None else None)
            st["default_scope"] = default_scope
            st["version"] = __version__
            return Stats(**st)

        return call("stats", go)

    return server
