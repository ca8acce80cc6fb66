"""Input checking: what the store accepts, refused with a :class:`StoreError` that names
the field and the fault before anything is written.

Episodes (:func:`episode_row`), vectors (:func:`blob`, :func:`check_dim`, and
:func:`vector_fault` for a stored one), text
(:func:`has_text`, :func:`check_utf8`, :func:`check_one_line` for ids and scopes). Recall
options are checked by :class:`sqlite_rrf.core.options.RecallOptions`.
"""

from __future__ import annotations

import json
import unicodedata
import uuid
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

#: Queries are cut to this many characters before they are embedded and searched.
MAX_QUERY_CHARS = 6000
#: The largest ``limit``, ``pool_size`` or ``bm25_limit`` a recall takes (SQLite's LIMIT
#: is a 64-bit integer; no memory holds more rows than this anyway).
MAX_COUNT = 2**31 - 1
#: Names of the four fused lists, in the order of ``weights`` tuples.
LISTS = ("bm25", "vector", "recency", "access")
IMPORTANCE = ("low", "normal", "high")

# The largest values an episode's fields may hold, refused (naming the field) by every way
# in: the Store, and so the command line, import, MCP and the server. Every output bound
# counts on them (a hit's id and scope are at most this long).
#: Characters of an episode's ``id`` (and of ``replaces``, which names one).
MAX_ID_CHARS = 256
#: Characters of an episode's ``scope`` (a directory's name is at most 255 bytes).
MAX_SCOPE_CHARS = 256
#: Characters of an episode's ``kind`` (a word: fact, preference, decision, ...).
MAX_KIND_CHARS = 64
#: Characters of an episode's ``metadata`` as stored (its JSON text).
MAX_METADATA_CHARS = 16_384
#: Characters of an episode's ``content`` (a LongMemEval session is up to 43,000; MCP's
#: ``remember`` takes less: :data:`sqlite_rrf.mcp.MAX_CONTENT_CHARS`).
MAX_CONTENT_CHARS = 100_000

Vector = Union[np.ndarray, Sequence[float], bytes]


class StoreError(ValueError):
    """Bad input to the store (the message names the field and the fault); nothing
    was written."""


def has_text(s: str) -> bool:
    """True when ``s`` has something besides white space and NULs."""
    return bool(s.replace("\x00", " ").strip())


def check_utf8(s: str, field_name: str) -> None:
    """Refuse text that cannot be stored as UTF-8 (lone surrogates, such as the
    undecodable bytes of a command-line argument)."""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as e:
        raise StoreError(
            f"{field_name}: not valid UTF-8 text (undecodable character at index {e.start})"
        ) from None


def check_size(value: Any, field_name: str, most: int) -> None:
    """Refuse text longer than ``most`` characters, naming the field, the limit and the
    length (never echoing the text)."""
    if isinstance(value, str) and len(value) > most:
        raise StoreError(
            f"{field_name}: {len(value):,} characters, more than the {most:,} it may have"
        )


def check_id(value: Any, field_name: str = "id") -> str:
    """An episode's id as a call names it (get, update, forget, replaces): non-empty text
    of at most :data:`MAX_ID_CHARS` characters."""
    if not isinstance(value, str) or not value:
        raise StoreError(f"{field_name}: must be non-empty text, got {type(value).__name__}")
    check_size(value, field_name, MAX_ID_CHARS)
    return value


def check_one_line(s: str, field_name: str) -> None:
    """Refuse text with a control character (a line break, tab, escape, NUL, ...: Unicode
    category Cc) or a line or paragraph separator (U+2028, U+2029). Ids and scopes are
    names shown on one line (the hook's Markdown, the command line's output): a line break
    in one could pass for a line of its own there."""
    for i, ch in enumerate(s):
        if ch in "\u2028\u2029" or unicodedata.category(ch) == "Cc":
            raise StoreError(
                f"{field_name}: must be one line of text without control "
                f"characters, got U+{ord(ch):04X} at index {i} in {s!r}"
            )


def blob(vec: Vector, field_name: str = "embedding") -> Tuple[bytes, int]:
    """A finite, non-zero vector as little-endian float32 bytes and its dimension."""
    if isinstance(vec, (bytes, bytearray, memoryview)):
        raw = bytes(vec)
        if len(raw) % 4:
            raise StoreError(f"{field_name}: a blob of {len(raw)} bytes is not float32 values")
        arr = np.frombuffer(raw, dtype="<f4")
    else:
        try:
            arr = np.asarray(vec, dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise StoreError(f"{field_name}: not a vector of numbers ({e})") from None
        if arr.ndim != 1:
            raise StoreError(f"{field_name}: must be 1-dimensional, got shape {arr.shape}")
        if np.isfinite(arr).all() and np.abs(arr).max(initial=0) > np.finfo(np.float32).max:
            raise StoreError(f"{field_name}: values out of float32 range")
        arr = arr.astype("<f4")
    if arr.size == 0:
        raise StoreError(f"{field_name}: empty vector")
    if not np.isfinite(arr).all():
        i = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise StoreError(f"{field_name}: non-finite value ({arr[i]}) at index {i}")
    if not arr.any():
        raise StoreError(f"{field_name}: zero vector (cosine is undefined)")
    return arr.astype("<f4").tobytes(), int(arr.size)


def check_dim(n: int, expected: Optional[int], what: str = "embedding") -> int:
    """The dimension every vector of a write must have: ``expected`` (the database's),
    or ``n`` (the first vector's) when there is none yet."""
    if expected is None:
        return n
    if n != expected:
        raise StoreError(
            f"{what}: dimension mismatch: the database holds {expected}-"
            f"dimensional embeddings, got {n}"
        )
    return expected


def vector_fault(emb: Any, dim: Optional[int]) -> Optional[str]:
    """Why a stored embedding cannot be used by the vector list (None: it can): not a
    float32 blob, a size other than ``dim``, NaN or infinite values, or a zero vector
    (its cosine is undefined)."""
    if not isinstance(emb, bytes) or len(emb) % 4 or not emb:
        return "not a float32 blob"
    v = np.frombuffer(emb, "<f4")
    if dim is not None and v.size != dim:
        return f"{v.size} values, the database holds {dim}"
    if not np.isfinite(v).all():
        i = int(np.flatnonzero(~np.isfinite(v))[0])
        return f"{v[i]} at index {i}"
    if not v.any():
        return "a zero vector: its cosine is undefined"
    return None


def episode_row(ep: Mapping[str, Any], embedding: Optional[bytes], now: int) -> Dict[str, Any]:
    """The ``episodes`` row of one episode (the keys of :meth:`Store.add`), its defaults
    filled in (a new uuid4 hex id, ``created_at = now``, ...); ``embedding`` is already
    checked (:func:`blob`)."""
    content = ep.get("content")
    if not isinstance(content, str) or not has_text(content):
        raise StoreError("content: must be non-empty text (not only spaces or NULs)")
    check_size(content, "content", MAX_CONTENT_CHARS)
    check_utf8(content, "content")
    eid = ep.get("id")
    if eid is None:
        eid = uuid.uuid4().hex
    elif not isinstance(eid, str) or not eid:
        raise StoreError(f"id: must be non-empty text, got {eid!r}"[:200])
    else:
        check_size(eid, "id", MAX_ID_CHARS)
        check_one_line(eid, "id")
    replaces = ep.get("replaces")
    if replaces is not None:
        check_id(replaces, "replaces")
        check_one_line(replaces, "replaces")
        if replaces == eid:
            raise StoreError(f"replaces: an episode cannot replace itself ({eid!r})")
    importance = ep.get("importance") or "normal"
    if importance not in IMPORTANCE:
        raise StoreError(f"importance: must be one of {IMPORTANCE}, got {str(importance)[:40]!r}")
    row: Dict[str, Any] = {
        "id": eid,
        "content": content,
        "embedding": embedding,
        "importance": importance,
        "kind": ep.get("kind"),
    }
    if row["kind"] is not None and not isinstance(row["kind"], str):
        raise StoreError(f"kind: must be text, got {type(row['kind']).__name__}")
    if isinstance(row["kind"], str):
        check_size(row["kind"], "kind", MAX_KIND_CHARS)
        check_utf8(row["kind"], "kind")
    scope = ep.get("scope")
    if scope is None:
        scope = ""
    elif not isinstance(scope, str):
        raise StoreError(f"scope: must be text, got {type(scope).__name__}")
    check_size(scope, "scope", MAX_SCOPE_CHARS)
    check_utf8(scope, "scope")
    check_one_line(scope, "scope")
    row["scope"] = scope
    for key in ("created_at", "accessed_at", "access_count", "confirmed_at"):
        v = ep.get(key)
        if v is None:
            v = 0 if key == "access_count" else (now if key == "created_at" else None)
        elif isinstance(v, bool) or not isinstance(v, int) or v < 0 or v > 2**62:
            raise StoreError(
                f"{key}: must be a non-negative integer"
                f"{' (ms since the epoch)' if key != 'access_count' else ''}, "
                f"got {v!r}"
            )
        row[key] = v
    if row["accessed_at"] is None:
        row["accessed_at"] = row["created_at"]
    md = ep.get("metadata")
    try:
        row["metadata"] = None if md is None else json.dumps(md, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise StoreError(f"metadata: not JSON-serialisable ({e})") from None
    except RecursionError:
        raise StoreError("metadata: nested too deeply to store as JSON") from None
    if row["metadata"] is not None and len(row["metadata"]) > MAX_METADATA_CHARS:
        raise StoreError(
            f"metadata: {len(row['metadata']):,} characters as JSON, more than the "
            f"{MAX_METADATA_CHARS:,} it may have"
        )
    if replaces is not None:
        row["replaces"] = replaces
    by = ep.get("superseded_by")  # an exported episode that another one had replaced
    if by is not None:
        check_id(by, "superseded_by")
        check_one_line(by, "superseded_by")
    row["superseded_by"] = by
    return row


def recall_query(query: str) -> str:
    """The query as it is searched: cut to :data:`MAX_QUERY_CHARS`, any undecodable
    character (a lone surrogate) made U+FFFD. Raises TypeError when it is not text."""
    if not isinstance(query, str):
        raise TypeError(f"query must be str, got {type(query).__name__}")
    return query[:MAX_QUERY_CHARS].encode("utf-8", "replace").decode("utf-8")
