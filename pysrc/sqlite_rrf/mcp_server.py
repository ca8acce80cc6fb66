"""``sqlite-rrf mcp DB``: the memory as a Model Context Protocol server over stdio.

Built on the official MCP Python SDK (``pip install 'sqlite-rrf[mcp]'``, ``mcp>=2``), which
this module imports only when the server runs, so the rest of the command line works
without it. Tools: ``remember``, ``recall``, ``update``, ``forget``, ``stats``; resources:
``memory://stats``, ``memory://recent``.

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

# No `from __future__ import annotations`: the SDK reads the tools' annotations, which
# name classes local to build_server, as objects.
import argparse
import contextlib
import os
import re
import sys
from typing import Any, Iterator

from .app import (ALL_SCOPES, SHARED_SCOPE, UserError, derive_scope, error_message,
                  escape, human_age, iso_time, open_store, parse_time,
                  scope_name, without_class_names)
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
#: M13: the most memories one ``recall`` returns (its ``limit``).
MAX_RECALL_LIMIT = 20
#: M14: how many memories the ``memory://recent`` resource shows, and where it cuts each
#: one's text (characters).
RECENT_MEMORIES = 10
RECENT_MAX_CHARS = 300

#: What to install for this command.
INSTALL_HINT = "pip install 'sqlite-rrf[mcp]'"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
#: The store's word for a memory, which the tools' texts do not use (M12).
_EPISODE = re.compile(r"\bepisode(s?)\b")


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
    from mcp.server.mcpserver.exceptions import ResourceError, ToolError
    from mcp.server.mcpserver.tools import Tool
    from mcp_types import CallToolResult, TextContent, ToolAnnotations
    from pydantic import BaseModel, Field, PrivateAttr, ValidationError

    from . import __version__
    from .relevance import DEFAULT_MIN_RELEVANCE
    from .statements import recall_defaults
    from .store import IMPORTANCE, PROFILES, StoreError, now_ms

    defaults = recall_defaults()

    Annotated = typing.Annotated
    log = logging.getLogger("sqlite_rrf.mcp")
    lock = threading.Lock() if lock is None else lock
    write_scope = "" if default_scope == ALL_SCOPES else stored_scope(default_scope, "--scope")
    shown_scope = escape(repr(default_scope))  # M8
    # M12: the scopes in words, for the descriptions (M8: escaped)
    project = escape(repr(scope_name(write_scope)))
    covers = ("every scope" if default_scope == ALL_SCOPES else
              f"{SHARED_SCOPE!r}" if write_scope == "" else
              f"this project's ({project}) and {SHARED_SCOPE!r}")

    def as_result(out: BaseModel) -> CallToolResult:
        """A tool's result: its structured content, and as text that JSON with no
        tag-like text (M8); a recollection's text also holds each hit's ``text``, which
        its structured content does not repeat (M11). Fields that are null (a hit's
        explanation when not asked for) are left out of both."""
        data = out.model_dump(mode="json", exclude_none=True)
        texts = getattr(out, "_texts", None)
        shown = data
        if texts is not None:
            shown = dict(data, hits=[{"id": h["id"], "text": t,
                                      **{k: v for k, v in h.items() if k != "id"}}
                                     for h, t in zip(data["hits"], texts)])
        return CallToolResult(content=[TextContent(type="text", text=inert_json(shown))],
                              structured_content=data)

    def inert_json(data: Any) -> str:
        """``data`` as JSON with no tag-like text (M8): the same values."""
        text = json.dumps(data, indent=2, ensure_ascii=False)
        for ch in "<>&\u2028\u2029":  # never outside a JSON string: the same values
            text = text.replace(ch, f"\\u{ord(ch):04x}")
        return text

    def plain(text: str) -> str:
        """The store's words in the tools' (M12): a memory, not an episode; no library's
        class name (M13)."""
        return _EPISODE.sub(lambda m: "memories" if m.group(1) else "memory",
                            without_class_names(text))

    def words(e: BaseException) -> str:
        """The one line for ``e`` (M2): the command line's message, no library's class
        name, text or URL (M13); a fault of ours says where its traceback is."""
        if isinstance(e, (UserError, StoreError, ValueError)):
            return plain(str(e))
        known = error_message(e)
        if known is not None:
            return plain(f"{store.path}: {known}")
        return (f"an unexpected fault in the server ({plain(str(e)) or 'no message'}); "
                "its traceback is on the server's stderr: please report it")

    def call(tool: str, fn: Any, result: Any = as_result) -> Any:
        """Run ``fn`` on the store: one call at a time (M7), stdout to stderr (M3), faults
        as tool errors with the CLI's messages (M2); the result as in M8."""
        with lock, contextlib.redirect_stdout(sys.stderr):
            try:
                return result(fn())
            except ToolError:
                raise
            except Exception as e:
                if error_message(e) is None and not isinstance(e, (StoreError, ValueError)):
                    log.exception("tool %s failed", tool)
                raise ToolError(words(e)) from None

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

    def when(ms: int, now: int) -> str:
        """A time for the model: ISO 8601 UTC and how long ago (M12)."""
        return f"{iso_time(ms)} ({human_age(ms, now)})"

    def rounded(value: Any) -> Any:
        """``value`` with its numbers rounded to 4 decimals (M12: no 15-digit noise)."""
        if isinstance(value, float):
            return round(value, 4)
        if isinstance(value, dict):
            return {k: rounded(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [rounded(v) for v in value]
        return value

    def scopes_searched(store_scope: Any) -> Optional[List[str]]:
        """The names of the scopes a recall covered (the store's ``scope=``)."""
        if store_scope is None:
            return None
        if isinstance(store_scope, str):
            return [scope_name(store_scope)]
        return [scope_name(s) for s in store_scope]

    def scopes_of(hits: Any) -> Dict[int, str]:
        """The stored scope of each hit, by rowid."""
        rowids = [h.rowid for h in hits]
        if not rowids:
            return {}
        marks = ", ".join("?" * len(rowids))
        return dict(store.conn.execute(
            f"SELECT rowid, scope FROM episodes WHERE rowid IN ({marks})", rowids).fetchall())

    # Choices and bounds are in the schemas (enum, minimum, maximum) for clients to see;
    # the tools and the store enforce them, with the command line's messages (M2).

    class Remembered(BaseModel):
        id: str = Field(description="the memory's id (for update and forget)")
        scope: str = Field(description="the scope it was saved in ('shared': every "
                                       "project's recall finds it)")
        embedded: bool = Field(description="whether it can be found by meaning as well as "
                                           "by its words (false: the server has no "
                                           "embedding model)")
        duplicate: bool = Field(
            default=False,
            description="true: the scope already had this text, so no copy was saved; "
                        "that memory was refreshed and its id is returned")

    class Explanation(BaseModel):
        relevance: Optional[float] = Field(
            default=None, description="how likely it is to be about the query, 0 to 1, the "
                                      "same scale for every query")
        similarity: Optional[float] = Field(
            default=None, description="cosine of its embedding with the query's")
        bm25_rank: Optional[int] = Field(
            default=None, description="rank by its words (BM25, 1 = best); absent: no "
                                      "word matched")
        vec_rank: Optional[int] = Field(
            default=None, description="rank by meaning (embedding similarity); absent: "
                                      "not in that list (no model, or outside the pool)")
        recency_rank: Optional[int] = Field(default=None, description="rank by last use")
        access_rank: Optional[int] = Field(default=None, description="rank by use count")
        importance: str = Field(description="low, normal or high")
        used: int = Field(description="how many recalls returned it before this one")
        last_used: str = Field(description="when it was last saved, changed or recalled "
                                           "(before this recall)")
        contributions: Dict[str, Any] = Field(
            description="each list's share of the score")

    class Hit(BaseModel):
        id: str = Field(description="the memory's id (for update and forget); its text "
                                    "is the hit's text in the tool's text content, not "
                                    "repeated here")
        score: float = Field(description="how well it matches, higher is better (rounded)")
        when: str = Field(description="when it was saved: ISO 8601 UTC time and how long "
                                      "ago")
        scope: str = Field(description="its scope ('shared': true everywhere)")
        cut_from: Optional[int] = Field(
            default=None, description="present when the text was cut at max_chars: the "
                                      "length of the whole text in characters")
        duplicates: Optional[int] = Field(
            default=None, description="present when it stands for near-copies of itself "
                                      "(it is the newest): how many")
        duplicate_ids: Optional[List[str]] = Field(
            default=None, description="the ids of those near-copies")
        explain: Optional[Explanation] = Field(
            default=None, description="why it ranked here (only with explain=true)")

    class Recollection(BaseModel):
        _texts: Optional[List[str]] = PrivateAttr(default=None)  # M11: the text content's
        hits: List[Hit] = Field(description="best first; empty when nothing relevant is "
                                            "stored")
        scopes: Optional[List[str]] = Field(
            default=None, description="the scopes searched; absent: every scope")
        warnings: Optional[List[str]] = Field(
            default=None, description="what the recall could not do (e.g. mark the "
                                      "memories as used on a read-only database)")
        reason: Optional[str] = Field(
            default=None, description="why there are no hits, when none was relevant "
                                      "enough")

    class Memory(BaseModel):
        id: str
        text: str = Field(description="its text")
        scope: str = Field(description="its scope ('shared': true everywhere)")
        kind: Optional[str] = Field(default=None, description="its kind, if it has one")
        importance: str = Field(description="low, normal or high")
        metadata: Optional[Any] = Field(default=None, description="the JSON saved with it")
        when: str = Field(description="when it was saved: ISO 8601 UTC time and how long "
                                      "ago")
        embedded: bool = Field(description="whether it can be found by meaning")

    class Forgotten(BaseModel):
        id: str
        existed: bool = Field(description="false: there was no memory with this id")

    class Stats(BaseModel):
        memories: int = Field(description="how many memories are stored")
        by_scope: Dict[str, int] = Field(description="memories per scope ('shared': "
                                                     "true everywhere)")
        by_importance: Dict[str, int] = Field(description="memories per importance")
        oldest: Optional[str] = Field(default=None, description="when the oldest was "
                                                                "saved (ISO 8601 UTC)")
        newest: Optional[str] = Field(default=None, description="when the newest was "
                                                                "saved (ISO 8601 UTC)")
        with_embedding: int = Field(description="memories that can be found by meaning")
        model: Optional[str] = Field(default=None, description="the embedding model this "
                                     "server uses; absent: none (words, recency and use "
                                     "only)")
        embedding_model: Optional[str] = Field(default=None,
                                               description="the model the database was "
                                                           "embedded with")
        default_scope: str = Field(description="this project's scope: remember saves "
                                               "there; '*': every scope")
        path: str = Field(description="the database file")
        size_bytes: int = Field(description="the database file's size")
        schema_version: int = Field(description="the database's schema version")
        version: str = Field(description="sqlite-rrf's version")

    def memory_out(ep: Any, now: int) -> Memory:
        return Memory(id=ep.id, text=ep.content, scope=scope_name(ep.scope), kind=ep.kind,
                      importance=ep.importance, metadata=ep.metadata,
                      when=when(ep.created_at, now), embedded=ep.embedding is not None)

    def stats_now() -> Stats:
        st = store.stats()
        by_scope: Dict[str, int] = {}
        for s, n in store.conn.execute(
                "SELECT scope, count(*) FROM episodes GROUP BY scope ORDER BY scope"):
            by_scope[scope_name(s)] = by_scope.get(scope_name(s), 0) + n
        emb = store.embedder
        model = (getattr(emb, "model_spec", None) or getattr(emb, "model_name", None)
                 if emb is not None else None)
        return Stats(memories=st["episodes"], by_scope=by_scope,
                     by_importance=st["by_importance"],
                     oldest=iso_time(st["oldest_created_at"]),
                     newest=iso_time(st["newest_created_at"]),
                     with_embedding=st["with_embedding"], model=model,
                     embedding_model=st["embedding_model"],
                     default_scope=(default_scope if default_scope == ALL_SCOPES
                                    else scope_name(default_scope)),
                     path=st["path"], size_bytes=st["size_bytes"],
                     schema_version=st["schema_version"], version=__version__)

    ScopeArg = Annotated[Optional[str], Field(
        description=f"where to save it: {SHARED_SCOPE!r} for what is true in every project "
                    f"(the user's preferences, facts about the user), else a project's "
                    f"name. Default: {shown_scope if write_scope else repr(SHARED_SCOPE)}")]
    IdArg = Annotated[str, Field(description="the memory's id, as recall or remember "
                                             "returned it")]
    KindArg = Annotated[Optional[str], Field(
        description="what sort of memory it is, in a word: fact, preference, decision, "
                    "todo, …")]
    MetadataArg = Annotated[Optional[Dict[str, Any]], Field(
        description="a JSON object saved with it (not searched), e.g. its source")]

    instructions = (
        "Long-term memory that lasts across conversations. Call `recall` at the start of "
        "a task and before answering about the user, this project or earlier decisions. "
        "Call `remember` to keep a durable fact, a preference of the user or a decision "
        "(recall first, so that nothing is saved twice). When a memory is wrong or out of "
        "date, call `update` with its id instead of remembering a second version. Call "
        "`forget` when the user asks you to forget something. Recall searches "
        f"{covers} memories unless you name a scope; remember saves into "
        + (f"{project}" if write_scope else repr(SHARED_SCOPE))
        + f" unless you pass scope={SHARED_SCOPE!r} for what is true in every project.")

    class MemoryServer(MCPServer):  # type: ignore[misc,valid-type]
        """The SDK's server, with strict arguments (M13)."""

        async def call_tool(self, name: str, arguments: Dict[str, Any],
                            context: Any = None) -> Any:
            tool = tools.get(name)
            if tool is not None:
                check_arguments(tool, arguments or {})
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as e:
                if isinstance(e.__cause__, ValidationError) and tool is not None:
                    raise ToolError(argument_errors(tool, e.__cause__)) from None
                if type(e) is not ToolError:  # the SDK's wrapper of a crash: as it is
                    raise
                # the message alone, as the command line says it (M2)
                raise ToolError(str(e).removeprefix(f"Error executing tool {name}: ")
                                ) from e.__cause__

    def check_arguments(tool: Any, arguments: Dict[str, Any]) -> None:
        """M13: an argument the tool does not take is refused, naming those it takes."""
        known = tool.parameters.get("properties", {})
        unknown = [a for a in arguments if a not in known]
        if unknown:
            raise ToolError(f"{', '.join(unknown)}: {tool.name} has no such argument; it "
                            f"takes {', '.join(known) or 'none'}")

    def expected(prop: Dict[str, Any]) -> str:
        """What a property of a tool's input schema takes, in words."""
        names = {"integer": "an integer", "number": "a number", "string": "text",
                 "boolean": "true or false", "object": "a JSON object",
                 "array": "a list", "null": "nothing"}
        if "enum" in prop:
            return "one of " + ", ".join(json.dumps(v) for v in prop["enum"] if v is not None)
        kinds = [p.get("type") for p in prop.get("anyOf", [prop])]
        return " or ".join(names.get(k, str(k)) for k in kinds if k != "null")

    def argument_errors(tool: Any, e: Any) -> str:
        """M13: the SDK's validation error in words, naming each argument and what it
        takes: no library text, URL or class name."""
        props = tool.parameters.get("properties", {})
        lines = []
        for err in e.errors(include_url=False):
            name = str(err["loc"][0]) if err["loc"] else ""
            if err["type"] == "missing":
                lines.append(f"{name}: missing; {tool.name} needs it "
                             f"({props.get(name, {}).get('description', '')})")
            else:
                got = json.dumps(err.get("input"), ensure_ascii=False, default=str)
                got = got if len(got) <= 60 else got[:60] + "…"
                lines.append(f"{name}: expected {expected(props.get(name, {}))}, got {got}")
        return "; ".join(dict.fromkeys(lines))

    tools: Dict[str, Any] = {}

    def tool(annotations: Any) -> Any:
        """Register a tool whose description is its docstring made one paragraph (M12) and
        whose input schema refuses other arguments (M13)."""
        def register(fn: Any) -> Any:
            t = Tool.from_function(fn, description=" ".join((fn.__doc__ or "").split()),
                                   annotations=annotations)
            t.parameters["additionalProperties"] = False
            tools[t.name] = t
            return fn
        return register

    @tool(ToolAnnotations(title="Remember", destructive_hint=False))
    def remember(
        content: Annotated[str, Field(
            description=f"the memory: one self-contained statement that will make sense "
                        f"later without this conversation, the key point first (e.g. "
                        f"\"The user prefers pnpm over npm.\"); at most "
                        f"{MAX_CONTENT_CHARS} characters (only about the first 1,000 are "
                        f"used to find it by meaning)",
            json_schema_extra={"maxLength": MAX_CONTENT_CHARS})],
        scope: ScopeArg = None,
        kind: KindArg = None,
        importance: Annotated[str, Field(
            description="low, normal or high; high memories come first in recall",
            json_schema_extra={"enum": list(IMPORTANCE)})] = "normal",
        metadata: MetadataArg = None,
        id: Annotated[Optional[str], Field(
            description="an id of your choosing; default: a new one. To change a memory "
                        "that has an id, use update")] = None,
    ) -> Remembered:
        """Save a durable memory: a fact, a preference of the user, or a decision worth
        knowing in a later conversation. Call recall first: if a memory already says this,
        leave it, or correct it with update instead of saving a second one. Save one
        self-contained statement per memory; not passing chat, secrets, or what is true
        only in this conversation. Saving a text the scope already has stores no copy.
        Returns the memory's id."""
        s = write_scope if scope is None else one_scope(scope)
        bounded(content)

        def go() -> Remembered:
            if id is not None and store.get(id) is not None:
                raise ToolError(taken(id))
            try:
                ids = store.add_many([dict(content=content, id=id, importance=importance,
                                           kind=kind, metadata=metadata, scope=s)])
            except StoreError:
                if id is not None and store.get(id) is not None:  # written meanwhile
                    raise ToolError(taken(id)) from None
                raise
            return Remembered(id=ids[0], scope=scope_name(s),
                              embedded=store.embedder is not None,
                              duplicate=bool(ids.duplicates))

        return call("remember", go)

    def taken(id: str) -> str:
        return (f"id: a memory with id {id!r} already exists; nothing was saved. To change "
                "it, call update with this id; to save another memory, call remember "
                "without an id")

    @tool(ToolAnnotations(title="Recall", read_only_hint=False, destructive_hint=False,
                          idempotent_hint=False))
    def recall(
        query: Annotated[str, Field(
            description="what to look for, in words: a question, a topic or the task at "
                        "hand (e.g. \"which package manager does the user prefer?\")")],
        limit: Annotated[int, Field(
            description=f"how many memories at most (default {defaults['result_limit']}, "
                        f"at most {MAX_RECALL_LIMIT})",
            json_schema_extra={"minimum": 1, "maximum": MAX_RECALL_LIMIT}
        )] = defaults["result_limit"],
        scope: Annotated[Optional[str], Field(
            description=f"search only this scope: a project's name, {SHARED_SCOPE!r} (what "
                        f"is true everywhere), or '*' for every scope. Default: {covers}"
        )] = None,
        kind: Annotated[Optional[str], Field(
            description="only memories of this kind (e.g. decision)")] = None,
        since: Annotated[Union[int, str, None], Field(
            description="only memories saved at or after this time: an ISO 8601 date or "
                        "time such as 2026-11-24 or 2026-11-24T09:30 (UTC unless it names "
                        "a zone), or milliseconds since 1970")] = None,
        until: Annotated[Union[int, str, None], Field(
            description="only memories saved before this time (as since)")] = None,
        profile: Annotated[Optional[str], Field(
            description=f"how to rank: {', '.join(PROFILES)} (default {defaults['profile']}"
                        f"; rarely needed)", json_schema_extra={"enum": [*PROFILES, None]}
        )] = None,
        explain: Annotated[bool, Field(
            description="add why each memory ranked where it did (ranks, relevance, each "
                        "part of the score)")] = False,
        max_chars: Annotated[int, Field(
            description=f"cut each memory's text at this many characters (default "
                        f"{DEFAULT_RECALL_MAX_CHARS}, at most {MAX_CONTENT_CHARS})",
            json_schema_extra={"minimum": 1, "maximum": MAX_CONTENT_CHARS}
        )] = DEFAULT_RECALL_MAX_CHARS,
        min_relevance: Annotated[float, Field(
            description=f"how relevant a memory must be to be returned, 0 to 1 (default "
                        f"{DEFAULT_MIN_RELEVANCE:g}; 0 returns the best matches even when "
                        f"they are not about the query)",
            json_schema_extra={"minimum": 0, "maximum": 1})] = DEFAULT_MIN_RELEVANCE,
    ) -> Recollection:
        """Search the memories for what is relevant to a question or task. Use it at the
        start of a task, before answering about the user, this project or earlier
        decisions, and before remember or update. Returns the best matches first, each
        with its id, text, score, when it was saved and its scope; none when nothing
        relevant is stored."""
        if isinstance(query, str) and not query.strip():
            raise ToolError("query: empty; say in words what to look for")
        if isinstance(limit, bool) or not 1 <= limit <= MAX_RECALL_LIMIT:
            raise ToolError(f"limit: must be from 1 to {MAX_RECALL_LIMIT}, got {limit}")
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
            now = now_ms()
            scopes = scopes_of(result)
            hits, texts = [], []
            for h in result:
                text = str(h.content)
                why = None
                if explain:
                    why = Explanation(
                        relevance=rounded(h.relevance), similarity=rounded(h.similarity),
                        bm25_rank=h.bm25_rank, vec_rank=h.vec_rank,
                        recency_rank=h.recency_rank, access_rank=h.access_rank,
                        importance=h.importance, used=h.access_count,
                        last_used=when(h.accessed_at, now),
                        contributions=rounded(h.explain))
                hits.append(Hit(
                    id=h.id, score=round(h.score, 3), when=when(h.created_at, now),
                    scope=scope_name(scopes.get(h.rowid, "")),
                    cut_from=len(text) if len(text) > max_chars else None,
                    duplicates=h.duplicates or None,
                    duplicate_ids=list(h.duplicate_ids) or None, explain=why))
                texts.append(text if len(text) <= max_chars else text[:max_chars] + " …")
            warnings = [plain(w) for w in result.warnings]
            if result.touch_error:
                warnings.append(plain(result.touch_error))
            out = Recollection(hits=hits, scopes=scopes_searched(store_scope),
                               warnings=warnings or None,
                               reason=plain(result.reason) if result.reason else None)
            out._texts = texts  # M11: the text content's, not the structured content's
            return out

        return call("recall", go)

    @tool(ToolAnnotations(title="Update", destructive_hint=True, idempotent_hint=True))
    def update(
        id: IdArg,
        content: Annotated[Optional[str], Field(
            description="the corrected text, which replaces the old one (it is no longer "
                        "found by the old words). Default: unchanged")] = None,
        importance: Annotated[Optional[str], Field(
            description="low, normal or high. Default: unchanged",
            json_schema_extra={"enum": [*IMPORTANCE, None]})] = None,
        kind: Annotated[Optional[str], Field(
            description="the new kind; '' removes it. Default: unchanged")] = None,
        metadata: Annotated[Optional[Dict[str, Any]], Field(
            description="the new metadata, which replaces the old. Default: "
                        "unchanged")] = None,
        scope: Annotated[Optional[str], Field(
            description=f"move it to this scope ({SHARED_SCOPE!r}: true in every "
                        f"project). Default: unchanged")] = None,
    ) -> Memory:
        """Correct or change a memory you found with recall: its text when a fact changed
        or was wrong, or its importance, kind, metadata or scope. Use this, not remember,
        for corrections, so that the old version is not recalled any more. What you leave
        out stays as it is. Returns the memory as it now is."""
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
        return call("update", lambda: memory_out(store.update(id, **fields), now_ms()))

    @tool(ToolAnnotations(title="Forget", destructive_hint=True, idempotent_hint=True))
    def forget(id: IdArg) -> Forgotten:
        """Delete a memory for good, when the user asks you to forget something, or a
        memory should not be kept at all (to correct one, use update). Says whether it
        existed."""
        return call("forget", lambda: Forgotten(id=id, existed=store.delete(id)))

    @tool(ToolAnnotations(title="Memory statistics", read_only_hint=True))
    def stats() -> Stats:
        """How many memories there are (by scope and importance), the oldest and newest,
        and whether they can be found by meaning (the embedding model). For questions
        about the memory itself; recall does not need it."""
        return call("stats", stats_now)

    server = MemoryServer("sqlite-rrf", version=__version__, instructions=instructions,
                          log_level=log_level,  # type: ignore[arg-type]
                          tools=list(tools.values()))
    # M14: the server has no prompts: it does not answer prompts/list, so it does not
    # advertise the capability (the SDK's MCPServer registers the handlers for any server).
    for method in ("prompts/list", "prompts/get"):
        server._lowlevel_server._request_handlers.pop(method, None)

    def resource_text(fn: Any) -> str:
        """A resource's JSON (M8), read under the lock (M7); faults in words (M2)."""
        with lock, contextlib.redirect_stdout(sys.stderr):
            try:
                return inert_json(fn())
            except Exception as e:
                if error_message(e) is None and not isinstance(e, (StoreError, ValueError)):
                    log.exception("a resource failed")
                raise ResourceError(words(e)) from None

    @server.resource("memory://stats", name="stats", title="Memory statistics",
                     mime_type="application/json",
                     description="how many memories there are, by scope and importance, "
                                 "the oldest and newest (ISO 8601 UTC), the model")
    def stats_resource() -> str:
        return resource_text(lambda: stats_now().model_dump(mode="json", exclude_none=True))

    @server.resource("memory://recent", name="recent", title="Recent memories",
                     mime_type="application/json",
                     description=f"the {RECENT_MEMORIES} memories saved last in {covers}, "
                                 f"newest first, each with its id, text (cut at "
                                 f"{RECENT_MAX_CHARS} characters), when and scope")
    def recent_resource() -> str:
        def go() -> Dict[str, Any]:
            where, args = "", []
            mine = recall_scopes(None, default_scope)  # what a recall covers by default
            if mine is not None:
                where = f"WHERE scope IN ({', '.join('?' * len(mine))}) "
                args = list(mine)
            rows = store.conn.execute(
                "SELECT id, content, scope, created_at FROM episodes " + where
                + "ORDER BY created_at DESC, rowid DESC LIMIT ?",
                [*args, RECENT_MEMORIES]).fetchall()
            now = now_ms()
            return {"memories": [
                {"id": i, "text": t if len(t) <= RECENT_MAX_CHARS
                 else t[:RECENT_MAX_CHARS] + " …",
                 "when": when(c, now), "scope": scope_name(s)} for i, t, s, c in rows]}

        return resource_text(go)

    return server
