"""The tools' outputs: their structured content (pydantic models, M1) and their text, that
content as JSON with no tag-like text (M8); compact hits and times for the model (M11,
M12: :func:`sqlite_rrf.app.display.when`, as the command line says them)."""

# No `from __future__ import annotations`: pydantic and the SDK read these annotations.
import json
from typing import Any, Dict, List, Optional, Tuple

from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel, Field, PrivateAttr

from ..app import scope_name
from ..app.display import noted, when


def as_result(out: BaseModel) -> CallToolResult:
    """A tool's result: its structured content, and as text that JSON with no
    tag-like text (M8); a recollection's text also holds each hit's ``text``, which
    its structured content does not repeat (M11). Fields that are null (a hit's
    explanation when not asked for) are left out of both."""
    data = out.model_dump(mode="json", exclude_none=True)
    texts = getattr(out, "_texts", None)
    shown = data
    if texts is not None:
        shown = dict(
            data,
            hits=[
                {"id": h["id"], "text": t, **{k: v for k, v in h.items() if k != "id"}}
                for h, t in zip(data["hits"], texts)
            ],
        )
    return CallToolResult(
        content=[TextContent(type="text", text=inert_json(shown))], structured_content=data
    )


def inert_json(data: Any) -> str:
    """``data`` as JSON with no tag-like text (M8): the same values."""
    text = json.dumps(data, indent=2, ensure_ascii=False)
    for ch in "<>&\u2028\u2029":  # never outside a JSON string: the same values
        text = text.replace(ch, f"\\u{ord(ch):04x}")
    return text


def rounded(value: Any) -> Any:
    """``value`` with its numbers rounded to 4 decimals (M12: no 15-digit noise)."""
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [rounded(v) for v in value]
    return value


# Choices and bounds are in the schemas (enum, minimum, maximum) for clients to see;
# the tools and the store enforce them, with the command line's messages (M2).

#: ``stats`` lists the scopes with the most memories, at most this many (``other_scopes``
#: counts the rest): its answer stays small however many scopes there are.
STATS_MAX_SCOPES = 50
#: A hit lists at most this many ``duplicate_ids`` (``duplicates`` counts them all).
MAX_DUPLICATE_IDS = 10


class Remembered(BaseModel):
    id: str = Field(description="the memory's id (for update and forget)")
    scope: str = Field(
        description="the scope it was saved in ('shared': every project's recall finds it)"
    )
    embedded: bool = Field(
        description="whether it can be found by meaning as well as "
        "by its words (false: the server has no "
        "embedding model)"
    )
    duplicate: bool = Field(
        default=False,
        description="true: the scope already had this text, so no copy was saved; "
        "that memory was refreshed and its id is returned",
    )
    replaced: Optional[str] = Field(
        default=None,
        description="the id of the memory this one replaced (kept, no longer recalled)",
    )
    may_update: Optional[str] = Field(
        default=None,
        description="the id of an older memory this one may update (about the same thing, "
        "a number, day or name differs); see note",
    )
    note: Optional[str] = Field(default=None, description="what to do about it, if anything")


class Explanation(BaseModel):
    relevance: Optional[float] = Field(
        default=None,
        description="how likely it is to be about the query, 0 to 1, the "
        "same scale for every query",
    )
    similarity: Optional[float] = Field(
        default=None, description="cosine of its embedding with the query's"
    )
    bm25_rank: Optional[int] = Field(
        default=None, description="rank by its words (BM25, 1 = best); absent: no word matched"
    )
    vec_rank: Optional[int] = Field(
        default=None,
        description="rank by meaning (embedding similarity); absent: "
        "not in that list (no model, or outside the pool)",
    )
    recency_rank: Optional[int] = Field(default=None, description="rank by last use")
    access_rank: Optional[int] = Field(default=None, description="rank by use count")
    importance: str = Field(description="low, normal or high")
    used: int = Field(description="how many recalls returned it before this one")
    last_used: str = Field(
        description="when it was last saved, changed or recalled (before this recall)"
    )
    contributions: Dict[str, Any] = Field(description="each list's share of the score")


class Hit(BaseModel):
    id: str = Field(
        description="the memory's id (for update and forget); its text "
        "is the hit's text in the tool's text content, not "
        "repeated here"
    )
    score: float = Field(description="how well it matches, higher is better (rounded)")
    when: str = Field(
        description="when it was saved: ISO 8601 UTC time and how long ago (a fact saved "
        "again later: when it was first noted and last confirmed)"
    )
    scope: str = Field(description="its scope ('shared': true everywhere)")
    cut_from: Optional[int] = Field(
        default=None,
        description="present when the text was cut at max_chars: the "
        "length of the whole text in characters",
    )
    duplicates: Optional[int] = Field(
        default=None,
        description="present when it stands for near-copies of itself (it is the newest): how many",
    )
    duplicate_ids: Optional[List[str]] = Field(
        default=None,
        description=f"the ids of those near-copies (at most {MAX_DUPLICATE_IDS})",
    )
    explain: Optional[Explanation] = Field(
        default=None, description="why it ranked here (only with explain=true)"
    )
    replaced_by: Optional[str] = Field(
        default=None,
        description="present (with include_superseded) when another memory replaced this "
        "one: its id. The fact is out of date",
    )


class Recollection(BaseModel):
    _texts: Optional[List[str]] = PrivateAttr(default=None)  # M11: the text content's
    hits: List[Hit] = Field(description="best first; empty when nothing relevant is stored")
    scopes: Optional[List[str]] = Field(
        default=None, description="the scopes searched; absent: every scope"
    )
    warnings: Optional[List[str]] = Field(
        default=None,
        description="what the recall could not do (e.g. mark the "
        "memories as used on a read-only database)",
    )
    reason: Optional[str] = Field(
        default=None, description="why there are no hits, when none was relevant enough"
    )


class Memory(BaseModel):
    id: str
    text: str = Field(description="its text")
    scope: str = Field(description="its scope ('shared': true everywhere)")
    kind: Optional[str] = Field(default=None, description="its kind, if it has one")
    importance: str = Field(description="low, normal or high")
    metadata: Optional[Any] = Field(default=None, description="the JSON saved with it")
    when: str = Field(description="when it was saved: ISO 8601 UTC time and how long ago")
    embedded: bool = Field(description="whether it can be found by meaning")


class Forgotten(BaseModel):
    id: str
    existed: bool = Field(description="false: there was no memory with this id")


class Stats(BaseModel):
    memories: int = Field(description="how many memories are stored")
    by_scope: Dict[str, int] = Field(description="memories per scope ('shared': true everywhere)")
    by_importance: Dict[str, int] = Field(description="memories per importance")
    oldest: Optional[str] = Field(
        default=None, description="when the oldest was saved (ISO 8601 UTC)"
    )
    newest: Optional[str] = Field(
        default=None, description="when the newest was saved (ISO 8601 UTC)"
    )
    with_embedding: int = Field(description="memories that can be found by meaning")
    model: Optional[str] = Field(
        default=None,
        description="the embedding model this "
        "server uses; absent: none (words, recency and use "
        "only)",
    )
    embedding_model: Optional[str] = Field(
        default=None, description="the model the database was embedded with"
    )
    default_scope: str = Field(
        description="this project's scope: remember saves there; '*': every scope"
    )
    path: str = Field(description="the database file (a tenant's name over a tenant's URL)")
    other_scopes: Optional[int] = Field(
        default=None,
        description=f"how many more scopes there are than the {STATS_MAX_SCOPES} largest "
        "listed in by_scope",
    )
    superseded: Optional[int] = Field(
        default=None, description="memories another one replaced (kept, not recalled)"
    )
    size_bytes: int = Field(description="the database file's size")
    schema_version: int = Field(description="the database's schema version")
    version: str = Field(description="sqlite-rrf's version")


def memory_out(ep: Any, now: int) -> Memory:
    """An episode as the model sees it (M12)."""
    return Memory(
        id=ep.id,
        text=ep.content,
        scope=scope_name(ep.scope),
        kind=ep.kind,
        importance=ep.importance,
        metadata=ep.metadata,
        when=when(ep.created_at, now),
        embedded=ep.embedding is not None,
    )


def hit_out(
    h: Any, scope: str, confirmed: Optional[int], max_chars: int, explain: bool, now: int
) -> Tuple[Hit, str]:
    """A recall hit as the model sees it (M11, M12) and its text, cut at ``max_chars``.
    Every other field is bounded too: the id and scope by the store's maximums
    (:data:`~sqlite_rrf.core.validate.MAX_ID_CHARS`,
    :data:`~sqlite_rrf.core.validate.MAX_SCOPE_CHARS`),
    the near-copies' ids by :data:`MAX_DUPLICATE_IDS`."""
    text = str(h.content)
    why = None
    if explain:
        why = Explanation(
            relevance=rounded(h.relevance),
            similarity=rounded(h.similarity),
            bm25_rank=h.bm25_rank,
            vec_rank=h.vec_rank,
            recency_rank=h.recency_rank,
            access_rank=h.access_rank,
            importance=h.importance,
            used=h.access_count,
            last_used=when(h.accessed_at, now),
            contributions=rounded(h.explain),
        )
    hit = Hit(
        id=h.id,
        score=round(h.score, 3),
        when=noted(h.created_at, confirmed, now),
        scope=scope,
        cut_from=len(text) if len(text) > max_chars else None,
        duplicates=h.duplicates or None,
        duplicate_ids=list(h.duplicate_ids)[:MAX_DUPLICATE_IDS] or None,
        explain=why,
    )
    return hit, (text if len(text) <= max_chars else text[:max_chars] + " …")


def remembered_out(
    ids: Any, scope: str, embedded: bool, replaces: Optional[str], near: Any
) -> Remembered:
    """``remember``'s answer: the id, and what the agent may want to do next (a text
    another memory replaced; an older memory this one may update)."""
    out = Remembered(id=ids[0], scope=scope, embedded=embedded, duplicate=bool(ids.duplicates))
    if replaces is not None and replaces != ids[0]:
        out.replaced = replaces
    superseded = getattr(ids, "superseded", {})
    if superseded:
        old, by = superseded[0]
        out.note = (
            f"this text is that of memory {old}, which {by} replaced: it stays replaced; "
            f"to make it current again, remember it with replaces={by!r}"
        )
    elif near is not None:
        other, cos, what = near
        out.may_update = other
        out.note = (
            f"this may update {other!r} (cos {cos:.2f}; it differs in {what}): call update "
            f"with id {other!r} instead, or remember with replaces={other!r}, so that the "
            "old fact is not recalled any more"
        )
    return out


def shown_path(store: Any, path: str) -> str:
    """The database as ``stats`` shows it: over a tenant's URL the tenant's name (the
    server's paths are not the tenant's business), else the file's path."""
    tenant = getattr(store, "tenant_name", None) or getattr(
        getattr(store, "_tenant", None), "name", None
    )
    return f"tenant {tenant}" if isinstance(tenant, str) else path
