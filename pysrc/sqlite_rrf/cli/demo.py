"""``sqlite-rrf demo``: a fresh database of the packaged sample episodes and one hybrid
recall of it, each list's part explained. It never replaces a database it did not make."""

from __future__ import annotations

import argparse
import os

TYPE_CHECKING = False  # typing is not imported at run time: `sqlite-rrf hook` starts fast
if TYPE_CHECKING:
    pass

from .. import __version__, loadable_path
from .commands import import_episodes, read_jsonl
from .common import CliError, check_model_options, embedder_for
from .recall import recall_and_print

DEMO_QUERY = "where are the postgres credentials kept?"
#: Where ``sqlite-rrf demo`` writes when no path is given: a name of its own, never the
#: name of a real memory.
DEMO_DB = "sqlite-rrf-demo.db"
_DEMO_MARK = "demo_sample"


def _check_demo_db(path: str, sample_ids: set) -> None:
    """Refuse to replace ``path`` unless the demo made it: an sqlite-rrf database marked
    as the demo's whose episodes are all the sample's."""
    import apsw

    from ..store import Store, StoreError

    refuse = (
        f"{path} exists and is not a database the demo made; the demo never replaces "
        "a database it did not create. Give the demo another path "
        f"(sqlite-rrf demo {DEMO_DB})"
    )
    try:
        with Store(path, readonly=True) as store:
            mark = store.meta(_DEMO_MARK)
            ids = set(store.matching_ids())
    except (StoreError, apsw.Error):
        raise CliError(refuse) from None
    if mark is None or not ids <= sample_ids:
        raise CliError(refuse)


def cmd_demo(args: argparse.Namespace) -> int:
    """Make a fresh demo database from the packaged sample episodes and show one hybrid
    recall of it, with each list's contribution explained."""
    import time

    from ..core.sql_files import data_path
    from ..store import Store

    check_model_options(args)
    episodes, labels = read_jsonl(data_path("sample_episodes.jsonl"))
    if os.path.lexists(args.db):
        _check_demo_db(args.db, {ep["id"] for ep in episodes})
    for suffix in ("", "-wal", "-shm"):
        if os.path.lexists(args.db + suffix):
            os.remove(args.db + suffix)
    # Shift the sample's times so that its newest episode is "now".
    shift = int(time.time() * 1000) - max(ep["created_at"] for ep in episodes)
    for ep in episodes:
        ep["created_at"] += shift
        ep["accessed_at"] += shift

    print(f"sqlite-rrf {__version__} — extension: {loadable_path()}")
    embedder = embedder_for(args)
    with Store(args.db) as store:
        store.add_meta(_DEMO_MARK, 1)
        if embedder is not None:
            store.attach_embedder(embedder)
        print(f"created {args.db} (schema version {store.stats()['schema_version']})")
        n, _ = import_episodes(store, "sample", episodes, labels, replace=False, quiet=True)
        print(
            f"imported {n} sample episodes"
            + (
                f", embedded with {embedder.model_name}"
                if embedder
                else " without embeddings: recalling with the BM25, recency and access lists"
            )
        )
        print(
            f"\nrecall: {args.query!r}  (pool: the {args.pool_size} most recently accessed "
            "episodes ∪ every BM25 hit)\n"
        )
        ns = argparse.Namespace(
            query=args.query,
            limit=args.limit,
            weights=None,
            k=None,
            pool="recent",
            pool_size=args.pool_size,
            no_touch=False,
            force=True,
            session=None,
            json=False,
            explain=True,
            profile=None,
            alpha=None,
            min_similarity=None,
            bm25_limit=None,
        )
        recall_and_print(store, ns)
    print(
        "\nIn the sqlite3 shell (the BM25, recency and access lists; the vector list needs "
        f":qvec): sqlite-rrf sql --pool recent > recall.sql, then sqlite3 {args.db} and "
        f".load {loadable_path()}, .param set :query '...', .param set :pool_size "
        f"{args.pool_size}, .mode line, .read recall.sql"
    )
    return 0
