"""A memory's whole life, on an open :class:`~sqlite_rrf.store.Store`: list, get, update,
forget, export, vacuum and stats. The command line (:mod:`sqlite_rrf.cli.manage`) and any
other way in (MCP) share these; each returns plain data (dicts, lists, ints) and raises
:class:`~sqlite_rrf.app.UserError` with a line for the user.

Scopes are taken as a user names them (:data:`sqlite_rrf.app.SHARED_SCOPE` or ``''`` for
the shared memory, :data:`sqlite_rrf.app.ALL_SCOPES` for every scope) and shown by name
(:func:`sqlite_rrf.app.scope_name`); an export keeps the stored value, so that ``import``
puts every episode back where it was. Times are ms since the epoch in the data;
:func:`sqlite_rrf.app.display.when` says them for people. The SQL is the Store's
(:mod:`sqlite_rrf.store.records`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, Generator, List, Optional, Tuple

from ..core.columns import RECORD_COLUMNS
from . import ALL_SCOPES, UserError, iso_time, scope_name, stored_scope

if TYPE_CHECKING:
    from ..store import EpisodeFilter, Store

__all__ = [
    "DEFAULT_LIST_LIMIT",
    "EXPORT_FIELDS",
    "VACUUM_CHECKPOINT_PATIENCE_MS",
    "Filters",
    "episode_record",
    "export_lines",
    "file_size",
    "forget",
    "get_episode",
    "is_export",
    "list_episodes",
    "matching_ids",
    "reclaimable_bytes",
    "stats",
    "update_episode",
    "vacuum",
]

#: How many episodes ``list`` shows when no limit is given.
DEFAULT_LIST_LIMIT = 20

#: The fields of an exported line, in order: every field ``sqlite-rrf import`` reads, which
#: are the store's record columns.
EXPORT_FIELDS = RECORD_COLUMNS


@dataclass(frozen=True)
class Filters:
    """Which episodes an operation covers: ``scope`` as a user names it (None or
    :data:`~sqlite_rrf.app.ALL_SCOPES`: every scope; ``shared`` or ``''``: the shared
    one), ``kind`` (exactly), ``since`` (ms, inclusive) and ``until`` (ms, exclusive) on
    ``created_at``."""

    scope: Optional[str] = None
    kind: Optional[str] = None
    since: Optional[int] = None
    until: Optional[int] = None

    @property
    def given(self) -> bool:
        """Whether any filter was given (a scope of every scope counts)."""
        return any(v is not None for v in (self.scope, self.kind, self.since, self.until))

    def stored(self) -> EpisodeFilter:
        """The filters as the Store takes them (the scope as stored)."""
        from ..store import EpisodeFilter

        scope = None
        if self.scope is not None and self.scope != ALL_SCOPES:
            scope = stored_scope(self.scope, "--scope")
        return EpisodeFilter(scope=scope, kind=self.kind, since=self.since, until=self.until)

    def describe(self) -> str:
        """The filters in words (``scope proj, kind fact, created since …``)."""
        said = []
        if self.scope is not None:
            said.append(
                "every scope"
                if self.scope == ALL_SCOPES
                else f"scope {scope_name(stored_scope(self.scope, '--scope'))}"
            )
        if self.kind is not None:
            said.append(f"kind {self.kind}")
        if self.since is not None:
            said.append(f"created at or after {iso_time(self.since)}")
        if self.until is not None:
            said.append(f"created before {iso_time(self.until)}")
        return ", ".join(said) or "every episode"


def _metadata(text: Any) -> Any:
    """Stored metadata decoded (another client's text that is not JSON: as it is)."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def episode_record(row: Any) -> Dict[str, Any]:
    """One episode as plain data (a row of
    :data:`~sqlite_rrf.store.RECORD_COLUMNS`): ``id``, ``content``,
    ``scope`` (by name), ``kind``, ``importance``, ``metadata`` (decoded), ``created_at``,
    ``accessed_at`` (ms), ``access_count``, ``embedded`` (whether it has an embedding),
    ``superseded_by`` (the id of the fact that replaced it; None: it is current),
    ``confirmed_at`` (ms: when its text was last stored again; None: never)."""
    record = dict(zip(RECORD_COLUMNS, row))
    record["scope"] = scope_name(record["scope"])
    record["metadata"] = _metadata(record["metadata"])
    record["embedding"] = record["embedding"] is not None
    return {("embedded" if k == "embedding" else k): v for k, v in record.items()}


def list_episodes(
    store: Store,
    filters: Filters = Filters(),
    limit: Optional[int] = DEFAULT_LIST_LIMIT,
    include_superseded: bool = False,
) -> Tuple[List[Dict[str, Any]], int]:
    """The episodes that match ``filters``, newest first (by ``created_at``), at most
    ``limit`` (None: all), as :func:`episode_record` dicts; and how many match in all.
    Episodes another fact replaced are left out unless ``include_superseded``."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise UserError(f"--limit: must be 0 (every episode) or more, got {limit!r}")
    rows, total = store.episode_rows(
        filters.stored(), limit=limit, include_superseded=include_superseded
    )
    return [episode_record(r) for r in rows], total


def get_episode(store: Store, id: str, command: str = "get") -> Dict[str, Any]:
    """The episode ``id`` (:func:`episode_record`, with ``embedding_dim``: its
    embedding's size, or None, and ``replaced``: the ids of the episodes it replaced); a
    :class:`UserError` naming ``command`` when there is none."""
    row = store.episode_row(id)
    if row is None:
        raise UserError(f"{command}: no episode with id {id!r}")
    rec = episode_record(row)
    emb = row[-3]
    rec["embedding_dim"] = len(emb) // 4 if isinstance(emb, bytes) else None
    rec["replaced"] = store.replaced(id)
    return rec


def update_episode(
    store: Store,
    id: str,
    *,
    content: Optional[str] = None,
    importance: Optional[str] = None,
    kind: Optional[str] = None,
    metadata: Any = None,
    scope: Optional[str] = None,
    clear_metadata: bool = False,
) -> Dict[str, Any]:
    """Change the fields given (MCP's ``update``: the others keep their values) and
    return the episode as it now is (:func:`get_episode`). New ``content`` is embedded
    again by the store's embedder (without one, the old embedding is dropped until
    ``sqlite-rrf embed``); ``kind=''`` clears the kind; ``metadata`` (a JSON object)
    replaces the old, ``clear_metadata`` removes it; ``scope`` moves the episode (as a
    user names it). Nothing given, or no such episode, is a :class:`UserError`."""
    from ..core.validate import StoreError

    fields: Dict[str, Any] = {}
    if content is not None:
        fields["content"] = content
    if importance is not None:
        fields["importance"] = importance
    if kind is not None:
        fields["kind"] = kind or None
    if clear_metadata:
        fields["metadata"] = None
    elif metadata is not None:
        if not isinstance(metadata, dict):
            raise UserError(f"--metadata: expected a JSON object, got {type(metadata).__name__}")
        fields["metadata"] = metadata
    if scope is not None:
        fields["scope"] = stored_scope(scope, "--scope")
    if not fields:
        raise UserError(
            "update: nothing to change: give --text, --importance, --kind, "
            "--metadata (or --no-metadata) or --scope"
        )
    get_episode(store, id, "update")
    try:
        store.update(id, **fields)
    except StoreError as e:
        raise UserError(f"update: {e}; nothing was changed") from None
    return get_episode(store, id, "update")


def matching_ids(store: Store, filters: Filters) -> List[str]:
    """The ids of the episodes that match ``filters``, newest first."""
    return store.matching_ids(filters.stored())


def forget(store: Store, ids: List[str]) -> int:
    """Delete the episodes ``ids`` in one transaction, all or none (an id that does not
    exist is a :class:`UserError` and nothing is deleted); returns how many."""
    from ..core.validate import StoreError

    try:
        return store.delete_many(ids)
    except StoreError as e:
        why = str(e)
        raise UserError(f"forget: {why[4:] if why.startswith('id: ') else why}") from None


def reclaimable_bytes(store: Store) -> int:
    """The bytes of the file's free pages: what ``vacuum`` gives back at least."""
    return store.free_bytes()


def export_lines(
    store: Store, filters: Filters = Filters(), embeddings: bool = True
) -> Generator[str, None, None]:
    """The episodes that match ``filters``, oldest row first, as JSONL lines (each ends
    with a newline) with every field ``sqlite-rrf import`` reads (:data:`EXPORT_FIELDS`):
    the stored scope (``''`` for the shared one), the times and access count as they
    are, the metadata decoded, the embedding as a list of numbers (exactly its float32
    values; null when it has none, or with ``embeddings=False``). Read in one snapshot.
    Importing the lines into a new database and exporting that gives the same bytes.

    A text another client stored as bytes that are not valid UTF-8 is written as every read
    shows it (each invalid sequence U+FFFD), and its original bytes, base64, under
    ``invalid_utf8`` (by field), which ``import`` ignores."""
    import base64

    import numpy as np

    for row, bad in store.export_rows(filters.stored()):
        line = dict(zip(EXPORT_FIELDS, row))
        emb = line["embedding"]
        vec = None
        if embeddings and isinstance(emb, bytes) and emb and len(emb) % 4 == 0:
            vec = np.frombuffer(emb, "<f4").tolist()
        line["embedding"] = vec
        line["metadata"] = _metadata(line["metadata"])
        if bad:
            line["invalid_utf8"] = {
                col: base64.b64encode(raw).decode("ascii") for col, raw in sorted(bad.items())
            }
        yield json.dumps(line, ensure_ascii=False) + "\n"


def is_export(path: str) -> bool:
    """Whether the file ``path`` is an earlier export (its first line a JSON object with
    exactly :data:`EXPORT_FIELDS`, in order, or the file empty): one ``export -o`` may
    replace without ``--force``."""
    try:
        with open(path, encoding="utf-8") as f:
            first = f.readline(1 << 22)
    except (OSError, UnicodeDecodeError):
        return False
    if not first:
        return os.path.getsize(path) == 0
    try:
        line = json.loads(first)
    except (ValueError, RecursionError):
        return False
    return isinstance(line, dict) and tuple(line) == EXPORT_FIELDS


def file_size(path: str) -> int:
    """The bytes the database takes on disk: the file and its ``-wal`` file."""
    total = 0
    for p in (path, path + "-wal"):
        try:
            total += os.path.getsize(p)
        except OSError:
            pass
    return total


#: How long ``vacuum``'s last step waits for other processes' readers to finish (ms)
#: before it leaves the ``-wal`` file for a later checkpoint.
VACUUM_CHECKPOINT_PATIENCE_MS = 1000


def vacuum(store: Store) -> Dict[str, Any]:
    """Give the space of deleted episodes back to the disk: rebuild the full-text index
    from the episodes (FTS5's ``rebuild``), rebuild the file (``VACUUM``), and write the
    rebuilt file back from the ``-wal`` and empty that (``wal_checkpoint(TRUNCATE)``: in
    WAL mode ``VACUUM`` writes the whole new file to the ``-wal`` first).

    Deleting an episode adds a delete marker to the full-text index; its entries go only
    when a merge meets the oldest segment. A merge that ends in one segment while the
    markers are kept leaves them for good: FTS5's ``optimize`` does nothing to a single
    segment (600 deleted episodes of 120 words kept 537 kB of index for 5 episodes). A
    rebuild reads the live episodes only: about as long as ``VACUUM`` itself.

    Returns ``size_before`` and ``size_after`` (bytes of the file and its ``-wal``),
    ``wal_emptied`` (False when another process kept reading for
    :data:`VACUUM_CHECKPOINT_PATIENCE_MS`: the rebuilt file then waits in the ``-wal``
    until a later checkpoint, at the latest when the last connection closes) and
    ``wal_bytes``. A read-only database is a :class:`UserError`; so is another process
    holding the write lock past the busy timeout (nothing is lost then)."""
    from ..core.validate import StoreError

    path = store.path
    if store.readonly:
        raise UserError(
            f"vacuum: {path} is read-only (read-only media or permissions): nothing was changed"
        )
    before = file_size(path)
    try:
        emptied = store.vacuum(VACUUM_CHECKPOINT_PATIENCE_MS)
    except StoreError as e:
        raise UserError(f"vacuum: {e}") from None
    wal = file_size(path) - file_size_main(path)
    return {
        "path": path,
        "size_before": before,
        "size_after": file_size(path),
        "wal_emptied": emptied,
        "wal_bytes": wal,
    }


def file_size_main(path: str) -> int:
    """The bytes of the database file alone (without its ``-wal``)."""
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def stats(store: Store) -> Dict[str, Any]:
    """:meth:`Store.stats <sqlite_rrf.store.Store.stats>` and ``by_scope``: the
    episodes per scope, by name (as MCP's ``stats``)."""
    st = store.stats()
    by_scope: Dict[str, int] = {}
    for scope, n in store.scope_counts(by_name=True):
        name = scope_name(scope)
        by_scope[name] = by_scope.get(name, 0) + n
    out: Dict[str, Any] = {}
    for key, value in st.items():
        out[key] = value
        if key == "by_importance":
            out["by_scope"] = by_scope
    out.setdefault("by_scope", by_scope)
    return out
