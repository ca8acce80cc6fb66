"""The tools and resources, at module level, and the endpoint they work on.

An :class:`Endpoint` is one store, its default scope (M4) and the lock that makes its
calls one at a time (M7). :func:`sqlite_rrf.mcp.build.build_server` makes a server whose
``lifespan`` yields it; each tool takes the SDK's ``Context`` and reads its endpoint from
``ctx.request_context.lifespan_context`` (:func:`endpoint_of`). The descriptions that name
the endpoint's scope (M12) hold :data:`COVERS` and :data:`SAVES_TO`, which
:meth:`Endpoint.describe` fills in when the server is made.
"""

# No `from __future__ import annotations`: the SDK reads the tools' annotations.
import contextlib
import logging
import re
import sys
import threading
from typing import Annotated, Any, Callable, Dict, List, Optional, Tuple, Union, cast

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp_types import ToolAnnotations
from pydantic import Field

from .. import __version__
from ..app import (
    ALL_SCOPES,
    SHARED_SCOPE,
    UserError,
    check_time_range,
    escape,
    iso_time,
    recall_scopes,
    scope_name,
    stored_scope,
)
from ..app.display import when
from ..core.relevance import DEFAULT_MIN_RELEVANCE
from ..core.statements import recall_defaults
from ..core.validate import MAX_ID_CHARS, MAX_KIND_CHARS, MAX_SCOPE_CHARS, check_size
from ..store import IMPORTANCE, PROFILES, RecallOptions, Store, StoreError, now_ms
from . import (
    DEFAULT_RECALL_MAX_CHARS,
    MAX_CONTENT_CHARS,
    MAX_RECALL_LIMIT,
    RECENT_MAX_CHARS,
    RECENT_MEMORIES,
)
from .errors import bounded, bounded_id, is_fault, one_scope, plain, words
from .outputs import (
    STATS_MAX_SCOPES,
    Forgotten,
    Memory,
    Recollection,
    Remembered,
    Stats,
    as_result,
    hit_out,
    inert_json,
    memory_out,
    remembered_out,
    shown_path,
)

log = logging.getLogger("sqlite_rrf.mcp")
defaults = recall_defaults()

#: In a description: what a recall covers by default at the endpoint (M12).
COVERS = "{covers}"
#: In a description: where remember saves by default at the endpoint (M12).
SAVES_TO = "{saves_to}"
_PLACEHOLDER = re.compile("|".join(re.escape(p) for p in (COVERS, SAVES_TO)))


class Endpoint:
    """What an endpoint's tools work on: ``store``, ``default_scope`` as in M4, and
    ``lock`` (default: a lock of its own), which serialises the tools' calls with the
    store's other users (``sqlite-rrf serve``'s hook socket)."""

    def __init__(self, store: Store, default_scope: str, lock: Any = None) -> None:
        self.store = store
        self.default_scope = default_scope
        self.lock = threading.Lock() if lock is None else lock
        self.write_scope = (
            "" if default_scope == ALL_SCOPES else stored_scope(default_scope, "--scope")
        )
        shown_scope = escape(repr(default_scope))  # M8
        # M12: the scopes in words, for the descriptions (M8: escaped)
        self.project = escape(repr(scope_name(self.write_scope)))
        self.covers = (
            "every scope"
            if default_scope == ALL_SCOPES
            else f"{SHARED_SCOPE!r}"
            if self.write_scope == ""
            else f"this project's ({self.project}) and {SHARED_SCOPE!r}"
        )
        self.saves_to = shown_scope if self.write_scope else repr(SHARED_SCOPE)

    def describe(self, text: str) -> str:
        """``text`` with :data:`COVERS` and :data:`SAVES_TO` said for this endpoint."""
        said = {COVERS: self.covers, SAVES_TO: self.saves_to}
        return _PLACEHOLDER.sub(lambda m: said[m.group(0)], text)

    def instructions(self) -> str:
        """The server's instructions to the model (M12)."""
        return (
            "Long-term memory that lasts across conversations. Call `recall` at the start "
            "of a task and before answering about the user, this project or earlier "
            "decisions. Call `remember` to keep a durable fact, a preference of the user or "
            "a decision (recall first, so that nothing is saved twice). When a memory is "
            "wrong, call `update` with its id instead of remembering a second version; when "
            "a fact changed (a new day, number or name), `update` it, or `remember` the new "
            "fact with `replaces` set to the old one's id (kept, no longer recalled). Call "
            "`forget` when the user asks you to forget something. "
            f"Recall searches {self.covers} memories unless you name a scope; remember "
            "saves into "
            + (f"{self.project}" if self.write_scope else repr(SHARED_SCOPE))
            + f" unless you pass scope={SHARED_SCOPE!r} for what is true in every project."
        )


def endpoint_of(ctx: Context) -> Endpoint:
    """The endpoint a tool call is for: the server's lifespan context."""
    return cast(Endpoint, ctx.request_context.lifespan_context)


def call(ep: Endpoint, tool: str, fn: Callable[[], Any], result: Any = as_result) -> Any:
    """Run ``fn`` on the endpoint's store: one call at a time (M7), stdout to stderr (M3),
    faults as tool errors with the CLI's messages (M2); the result as in M8."""
    with ep.lock, contextlib.redirect_stdout(sys.stderr):
        try:
            return result(fn())
        except ToolError:
            raise
        except Exception as e:
            if is_fault(e):
                log.exception("tool %s failed", tool)
            raise ToolError(words(e, ep.store)) from None


def scopes_searched(store_scope: Any) -> Optional[List[str]]:
    """The names of the scopes a recall covered (the store's ``scope=``)."""
    if store_scope is None:
        return None
    if isinstance(store_scope, str):
        return [scope_name(store_scope)]
    return [scope_name(s) for s in store_scope]


def stats_now(ep: Endpoint) -> Stats:
    """The ``stats`` tool's answer and the ``memory://stats`` resource's."""
    store = ep.store
    st = store.stats()
    counts = store.scope_counts()
    by_scope: Dict[str, int] = {}
    for s, n in counts[:STATS_MAX_SCOPES]:  # bounded: the largest scopes
        by_scope[scope_name(s)] = by_scope.get(scope_name(s), 0) + n
    emb = store.embedder
    model = (
        getattr(emb, "model_spec", None) or getattr(emb, "model_name", None)
        if emb is not None
        else None
    )
    return Stats(
        memories=st["episodes"],
        by_scope=by_scope,
        by_importance=st["by_importance"],
        oldest=iso_time(st["oldest_created_at"]),
        newest=iso_time(st["newest_created_at"]),
        with_embedding=st["with_embedding"],
        model=model,
        embedding_model=st["embedding_model"],
        default_scope=(
            ep.default_scope if ep.default_scope == ALL_SCOPES else scope_name(ep.default_scope)
        ),
        path=shown_path(store, st["path"]),
        other_scopes=len(counts) - STATS_MAX_SCOPES if len(counts) > STATS_MAX_SCOPES else None,
        superseded=st.get("superseded"),
        size_bytes=st["size_bytes"],
        schema_version=st["schema_version"],
        version=__version__,
    )


ScopeArg = Annotated[
    Optional[str],
    Field(
        description=f"where to save it: {SHARED_SCOPE!r} for what is true in every project "
        f"(the user's preferences, facts about the user), else a project's "
        f"name. Default: {SAVES_TO}"
    ),
]
IdArg = Annotated[str, Field(description="the memory's id, as recall or remember returned it")]
KindArg = Annotated[
    Optional[str],
    Field(description="what sort of memory it is, in a word: fact, preference, decision, todo, …"),
]
MetadataArg = Annotated[
    Optional[Dict[str, Any]],
    Field(description="a JSON object saved with it (not searched), e.g. its source"),
]

#: The tools in the order they are listed: name → (function, annotations).
TOOLS: Dict[str, Tuple[Callable[..., Any], ToolAnnotations]] = {}


def tool(annotations: ToolAnnotations) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Add a tool to :data:`TOOLS` (the server makes its description its docstring made
    one paragraph, M12, and its input schema refuse other arguments, M13)."""

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        TOOLS[fn.__name__] = (fn, annotations)
        return fn

    return register


@tool(ToolAnnotations(title="Remember", destructive_hint=False))
def remember(
    ctx: Context,
    content: Annotated[
        str,
        Field(
            description=f"the memory: one self-contained statement that will make sense "
            f"later without this conversation, the key point first (e.g. "
            f'"The user prefers pnpm over npm."); at most '
            f"{MAX_CONTENT_CHARS} characters (only about the first 1,000 are "
            f"used to find it by meaning)",
            json_schema_extra={"maxLength": MAX_CONTENT_CHARS},
        ),
    ],
    scope: ScopeArg = None,
    kind: KindArg = None,
    importance: Annotated[
        str,
        Field(
            description="low, normal or high; high memories come first in recall",
            json_schema_extra={"enum": list(IMPORTANCE)},
        ),
    ] = "normal",
    metadata: MetadataArg = None,
    id: Annotated[
        Optional[str],
        Field(
            description="an id of your choosing; default: a new one. To change a memory "
            f"that has an id, use update. At most {MAX_ID_CHARS} characters",
            json_schema_extra={"maxLength": MAX_ID_CHARS},
        ),
    ] = None,
    replaces: Annotated[
        Optional[str],
        Field(
            description="the id of a memory this one replaces, when a fact changed (e.g. "
            "deploys moved from Tuesdays to Thursdays): the old memory is kept but no "
            "longer recalled. Default: none",
            json_schema_extra={"maxLength": MAX_ID_CHARS},
        ),
    ] = None,
) -> Remembered:
    """Save a durable memory: a fact, a preference of the user, or a decision worth
    knowing in a later conversation. Call recall first: if a memory already says this,
    leave it, or correct it with update instead of saving a second one. Save one
    self-contained statement per memory; not passing chat, secrets, or what is true
    only in this conversation. Saving a text the scope already has stores no copy. When
    a fact changed, pass replaces with the old memory's id. Returns the memory's id, and
    a note when it may update an older memory."""
    ep = endpoint_of(ctx)
    store = ep.store
    s = ep.write_scope if scope is None else one_scope(scope)
    bounded(content)

    def go() -> Remembered:
        if id is not None and store.get(id) is not None:
            raise ToolError(taken(id))
        try:
            ids = store.add_many(
                [
                    dict(
                        content=content,
                        id=id,
                        importance=importance,
                        kind=kind,
                        metadata=metadata,
                        scope=s,
                        replaces=replaces,
                    )
                ]
            )
        except StoreError:
            if id is not None and store.get(id) is not None:  # written meanwhile
                raise ToolError(taken(id)) from None
            raise
        near = None if (replaces or ids.duplicates) else store.likely_update(ids[0])
        return remembered_out(ids, scope_name(s), store.embedder is not None, replaces, near)

    return call(ep, "remember", go)


def taken(id: str) -> str:
    return (
        f"id: a memory with id {id!r} already exists; nothing was saved. To change "
        "it, call update with this id; to save another memory, call remember "
        "without an id"
    )


@tool(
    ToolAnnotations(
        title="Recall", read_only_hint=False, destructive_hint=False, idempotent_hint=False
    )
)
def recall(
    ctx: Context,
    query: Annotated[
        str,
        Field(
            description="what to look for, in words: a question, a topic or the task at "
            'hand (e.g. "which package manager does the user prefer?")'
        ),
    ],
    limit: Annotated[
        int,
        Field(
            description=f"how many memories at most (default {defaults['result_limit']}, "
            f"at most {MAX_RECALL_LIMIT})",
            json_schema_extra={"minimum": 1, "maximum": MAX_RECALL_LIMIT},
        ),
    ] = defaults["result_limit"],
    scope: Annotated[
        Optional[str],
        Field(
            description=f"search only this scope: a project's name, {SHARED_SCOPE!r} (what "
            f"is true everywhere), or '*' for every scope. Default: {COVERS}"
        ),
    ] = None,
    kind: Annotated[
        Optional[str],
        Field(
            description="only memories of this kind (e.g. decision)",
            json_schema_extra={"maxLength": MAX_KIND_CHARS},
        ),
    ] = None,
    since: Annotated[
        Union[int, str, None],
        Field(
            description="only memories saved at or after this time: an ISO 8601 date or "
            "time such as 2026-11-24 or 2026-11-24T09:30 (UTC unless it names "
            "a zone), or milliseconds since 1970"
        ),
    ] = None,
    until: Annotated[
        Union[int, str, None], Field(description="only memories saved before this time (as since)")
    ] = None,
    profile: Annotated[
        Optional[str],
        Field(
            description=f"how to rank: {', '.join(PROFILES)} (default {defaults['profile']}"
            f"; rarely needed)",
            json_schema_extra={"enum": [*PROFILES, None]},
        ),
    ] = None,
    explain: Annotated[
        bool,
        Field(
            description="add why each memory ranked where it did (ranks, relevance, each "
            "part of the score)"
        ),
    ] = False,
    max_chars: Annotated[
        int,
        Field(
            description=f"cut each memory's text at this many characters (default "
            f"{DEFAULT_RECALL_MAX_CHARS}, at most {MAX_CONTENT_CHARS})",
            json_schema_extra={"minimum": 1, "maximum": MAX_CONTENT_CHARS},
        ),
    ] = DEFAULT_RECALL_MAX_CHARS,
    min_relevance: Annotated[
        float,
        Field(
            description=f"how relevant a memory must be to be returned, 0 to 1 (default "
            f"{DEFAULT_MIN_RELEVANCE:g}; 0 returns the best matches even when "
            f"they are not about the query)",
            json_schema_extra={"minimum": 0, "maximum": 1},
        ),
    ] = DEFAULT_MIN_RELEVANCE,
    include_superseded: Annotated[
        bool,
        Field(
            description="also the memories another one replaced (remember with replaces); "
            "default false: only current facts"
        ),
    ] = False,
) -> Recollection:
    """Search the memories for what is relevant to a question or task. Use it at the
    start of a task, before answering about the user, this project or earlier
    decisions, and before remember or update. Returns the best matches first, each
    with its id, text, score, when it was saved and its scope; none when nothing
    relevant is stored."""
    ep = endpoint_of(ctx)
    store = ep.store
    if isinstance(query, str) and not query.strip():
        raise ToolError("query: empty; say in words what to look for")
    if isinstance(limit, bool) or not 1 <= limit <= MAX_RECALL_LIMIT:
        raise ToolError(f"limit: must be from 1 to {MAX_RECALL_LIMIT}, got {limit}")
    if isinstance(max_chars, bool) or not 1 <= max_chars <= MAX_CONTENT_CHARS:
        raise ToolError(f"max_chars: must be from 1 to {MAX_CONTENT_CHARS}, got {max_chars}")
    try:  # the project's scope and the shared one, unless a scope is named
        for name, value, most in (
            ("scope", scope, MAX_SCOPE_CHARS),
            ("kind", kind, MAX_KIND_CHARS),
        ):
            check_size(value, name, most)
        store_scope = recall_scopes(scope, ep.default_scope)
    except (UserError, StoreError) as e:
        raise ToolError(str(e)) from None

    def go() -> Recollection:
        since_ms, until_ms = check_time_range(
            None if since is None else str(since),
            None if until is None else str(until),
            "since",
            "until",
        )
        options = RecallOptions(
            limit=limit,
            scope=store_scope,
            kind=kind,
            since=since_ms,
            until=until_ms,
            profile=profile,
            force=True,
            min_relevance=min_relevance,
            include_superseded=include_superseded or None,  # False: the statement's default
        )
        result = store.recall(query, options=options)
        now = now_ms()
        facts = store.hit_facts([h.rowid for h in result])
        hits, texts = [], []
        for h in result:
            scope, confirmed, by = facts.get(h.rowid, ("", None, None))
            hit, text = hit_out(h, scope_name(scope), confirmed, max_chars, explain, now)
            hit.replaced_by = by  # only with include_superseded
            hits.append(hit)
            texts.append(text)
        warnings = [plain(w) for w in result.warnings]
        if result.touch_error:
            warnings.append(plain(result.touch_error))
        out = Recollection(
            hits=hits,
            scopes=scopes_searched(store_scope),
            warnings=warnings or None,
            reason=plain(result.reason) if result.reason else None,
        )
        out._texts = texts  # M11: the text content's, not the structured content's
        return out

    return call(ep, "recall", go)


@tool(ToolAnnotations(title="Update", destructive_hint=True, idempotent_hint=True))
def update(
    ctx: Context,
    id: IdArg,
    content: Annotated[
        Optional[str],
        Field(
            description="the corrected text, which replaces the old one (it is no longer "
            "found by the old words). Default: unchanged"
        ),
    ] = None,
    importance: Annotated[
        Optional[str],
        Field(
            description="low, normal or high. Default: unchanged",
            json_schema_extra={"enum": [*IMPORTANCE, None]},
        ),
    ] = None,
    kind: Annotated[
        Optional[str], Field(description="the new kind; '' removes it. Default: unchanged")
    ] = None,
    metadata: Annotated[
        Optional[Dict[str, Any]],
        Field(description="the new metadata, which replaces the old. Default: unchanged"),
    ] = None,
    scope: Annotated[
        Optional[str],
        Field(
            description=f"move it to this scope ({SHARED_SCOPE!r}: true in every "
            f"project). Default: unchanged"
        ),
    ] = None,
) -> Memory:
    """Correct or change a memory you found with recall: its text when a fact changed
    or was wrong, or its importance, kind, metadata or scope. Use this, not remember,
    for corrections, so that the old version is not recalled any more. What you leave
    out stays as it is. Returns the memory as it now is."""
    ep = endpoint_of(ctx)
    bounded_id(id)
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
    return call(ep, "update", lambda: memory_out(ep.store.update(id, **fields), now_ms()))


@tool(ToolAnnotations(title="Forget", destructive_hint=True, idempotent_hint=True))
def forget(ctx: Context, id: IdArg) -> Forgotten:
    """Delete a memory for good, when the user asks you to forget something, or a
    memory should not be kept at all (to correct one, use update). Says whether it
    existed."""
    ep = endpoint_of(ctx)
    bounded_id(id)
    return call(ep, "forget", lambda: Forgotten(id=id, existed=ep.store.delete(id)))


@tool(ToolAnnotations(title="Memory statistics", read_only_hint=True))
def stats(ctx: Context) -> Stats:
    """How many memories there are (by scope and importance), the oldest and newest,
    and whether they can be found by meaning (the embedding model). For questions
    about the memory itself; recall does not need it."""
    ep = endpoint_of(ctx)
    return call(ep, "stats", lambda: stats_now(ep))


# ---- the resources (M14): the server binds them to its endpoint ----


def resource_text(ep: Endpoint, fn: Callable[[], Any]) -> str:
    """A resource's JSON (M8), read under the lock (M7); faults in words (M2)."""
    with ep.lock, contextlib.redirect_stdout(sys.stderr):
        try:
            return inert_json(fn())
        except Exception as e:
            if is_fault(e):
                log.exception("a resource failed")
            raise ResourceError(words(e, ep.store)) from None


def stats_resource(ep: Endpoint) -> str:
    """``memory://stats``: the ``stats`` tool's answer."""
    return resource_text(ep, lambda: stats_now(ep).model_dump(mode="json", exclude_none=True))


def recent_resource(ep: Endpoint) -> str:
    """``memory://recent``: the memories saved last in the scopes a recall covers by
    default, newest first, compact."""

    def go() -> Dict[str, Any]:
        mine = recall_scopes(None, ep.default_scope)  # what a recall covers by default
        rows = ep.store.recent(None if mine is None else list(mine), RECENT_MEMORIES)
        now = now_ms()
        return {
            "memories": [
                {
                    "id": i,
                    "text": t if len(t) <= RECENT_MAX_CHARS else t[:RECENT_MAX_CHARS] + " …",
                    "when": when(c, now),
                    "scope": scope_name(s),
                }
                for i, t, s, c in rows
            ]
        }

    return resource_text(ep, go)
