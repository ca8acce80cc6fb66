"""The ``sqlite-rrf`` command line (also ``python -m sqlite_rrf``).

Commands: ``init``, ``import``, ``add``, ``recall``, ``embed``, ``stats``, ``stopwords``,
``list``, ``get``, ``update``, ``forget``, ``export``, ``vacuum`` (:mod:`sqlite_rrf.cli_manage`),
``maintain``, ``model``, ``path``, ``sql``, ``knn``, ``demo``, ``eval``. Every command that
embeds takes
``--model`` (a GGUF path or ``hf:ORG/REPO/FILE.gguf``); without it the model is
``$SQLITE_RRF_MODEL``, else the default (:data:`sqlite_rrf.models.DEFAULT_MODEL`); the
database's own model is loaded only when it is one of these. Without any model, ``add``, ``import``,
``recall`` and ``demo`` work with the BM25, recency and access lists and say so once.

A command imports what it runs and no more: the parser of every command is built on each
run, from light modules only (:mod:`sqlite_rrf.statements` names the pools and
profiles), and the store, numpy, the embedder and the evaluation are imported by the
commands that use them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

TYPE_CHECKING = False  # typing is not imported at run time: `sqlite-rrf hook` starts fast
if TYPE_CHECKING:
    from typing import Any, List, Optional, Sequence, Tuple

from . import __version__, loadable_path
from .app import (UserError, ascii_float, check_model_args, choose_embedder, error_message,
                  fault_message, float_arg, int_arg, note, open_store, parse_time)
from .app import stored_scope
# relevance, resources and statements are imported where they are used: `sqlite-rrf hook`
# asking a warm server imports none of them (hook.main)

EXIT_USAGE = 2
EXIT_ERROR = 1


#: The command line's one-line errors are the application layer's (exit status 1).
CliError = UserError


def _embedder(args: argparse.Namespace, remembered: Optional[str] = None,
              required: bool = False) -> Any:
    """The Embedder of the chosen model, or None (:func:`sqlite_rrf.app.choose_embedder`
    with ``--model`` and ``--n-ctx``)."""
    return choose_embedder(getattr(args, "model", None), getattr(args, "n_ctx", None),
                           remembered=remembered, required=required)


def _check_model_args(args: argparse.Namespace) -> None:
    """Refuse a malformed --model or --n-ctx before anything is opened."""
    check_model_args(getattr(args, "model", None), getattr(args, "n_ctx", None))


def _open(args: argparse.Namespace, model: Optional[str] = None,
          must_exist: bool = True) -> Any:
    """Open ``args.db`` (:func:`sqlite_rrf.app.open_store`): ``model`` 'write' or 'recall'
    attaches the model chosen by ``--model`` and ``--n-ctx``."""
    return open_store(args.db, model, model=getattr(args, "model", None),
                      n_ctx=getattr(args, "n_ctx", None), must_exist=must_exist)


def _weights(text: Optional[str]) -> Optional[List[float]]:
    if text is None:
        return None
    try:
        ws = [_ascii_float(x) for x in text.split(",")]
    except ValueError:
        raise CliError(f"--weights: expected four numbers b,v,r,a, got {text!r}") from None
    if len(ws) != 4:
        raise CliError(f"--weights: expected four numbers b,v,r,a, got {len(ws)}")
    return ws


# ---- commands ----

def cmd_init(args: argparse.Namespace) -> int:
    from .store import Store

    with Store(args.db) as store:
        v = store.stats()["schema_version"]
    print(f"{args.db}: ready (schema version {v})")
    return 0


def read_jsonl(path: str) -> tuple:
    """Episodes and their labels (``line N``) from a JSONL file; raises CliError
    naming the first bad line."""
    episodes, labels = [], []
    try:
        f = sys.stdin if path == "-" else open(path, encoding="utf-8")
    except OSError as e:
        raise CliError(f"{path}: {e.strerror}") from None
    with f:
        n = 0
        while True:
            n += 1
            try:
                line = f.readline()
            except UnicodeDecodeError as e:
                raise CliError(f"{path}: line {n}: not valid UTF-8 (byte {e.object[e.start]:#04x} "
                               "cannot be decoded); nothing was imported") from None
            if not line:
                break
            if not line.strip():
                continue
            try:
                ep = json.loads(line)
            except json.JSONDecodeError as e:
                raise CliError(f"{path}: line {n}: invalid JSON ({e.msg} at column {e.colno}); "
                               "nothing was imported") from None
            except (ValueError, RecursionError) as e:  # a 5,000-digit number, deep nesting
                why = "nested too deeply" if isinstance(e, RecursionError) else str(e)
                raise CliError(f"{path}: line {n}: invalid JSON ({why}); nothing was imported"
                               ) from None
            if not isinstance(ep, dict):
                raise CliError(f"{path}: line {n}: expected a JSON object; nothing was imported")
            unknown = set(ep) - {"id", "content", "embedding", "created_at", "accessed_at",
                                 "access_count", "importance", "kind", "metadata", "scope"}
            if unknown:
                raise CliError(f"{path}: line {n}: unknown field(s) {sorted(unknown)}; "
                               "nothing was imported")
            if isinstance(ep.get("scope"), str):  # 'shared' is the shared scope, as stored ''
                try:
                    ep["scope"] = stored_scope(ep["scope"], "scope")
                except UserError as e:
                    raise CliError(f"{path}: line {n}: {e}; nothing was imported") from None
            episodes.append(ep)
            labels.append(f"line {n}")
    return episodes, labels


def _import(store: Any, path: str, episodes: list, labels: list, replace: bool,
            quiet: bool = False) -> Tuple[int, str]:
    """Import the episodes; returns how many were stored and what to say about the
    repeated ones."""
    from .store import StoreError

    try:
        ids = store.add_many(episodes, labels=labels, replace=replace,
                             progress=None if not quiet else False)
    except StoreError as e:
        raise CliError(f"{path}: {e}; nothing was imported") from None
    return len(ids) - len(ids.duplicates), _repeated(ids)


def _repeated(ids: Any) -> str:
    """What to add to the import's line about the episodes that repeated a text of their
    scope (Store.add_many's ``duplicates`` and ``repeats``); '' when none did."""
    said = []
    if ids.duplicates:
        n = len(ids.duplicates)
        said.append(f"{n} repeated a text already stored in {'its' if n == 1 else 'their'} "
                    "scope (the same after normalising case and white space): no copy was "
                    "stored; the episode with that text was refreshed")
    if ids.repeats:
        n = len(ids.repeats)
        said.append(f"{n} {'has an id of its' if n == 1 else 'have ids of their'} own and "
                    "repeated a text of the scope: stored all the same")
    return "; " + "; ".join(said) if said else ""


def cmd_import(args: argparse.Namespace) -> int:
    episodes, labels = read_jsonl(args.file)
    need_embed = any(ep.get("embedding") is None for ep in episodes)
    with _open(args, model="write" if need_embed else None, must_exist=False) as store:
        n, repeated = _import(store, args.file, episodes, labels, args.replace)
    print(f"imported {n} episodes into {args.db}{repeated}")
    return 0


def cmd_add(args: argparse.Namespace) -> int:
    from .store import StoreError

    with _open(args, model="write", must_exist=False) as store:
        try:
            ids = store.add_many([dict(content=args.text, id=args.id,
                                       importance=args.importance, kind=args.kind,
                                       scope=stored_scope(args.scope, "--scope"))])
        except StoreError as e:
            raise CliError(str(e)) from None
    if ids.duplicates:
        note(f"the scope already had this text (the same after normalising case and white "
             f"space): no copy was stored; episode {ids[0]} was refreshed")
    print(ids[0])
    return 0


_time_arg = parse_time
_ascii_float = ascii_float


def _format_hit(i: int, h: Any, explain: bool, width: int = 100) -> str:
    def rank(name: str, r: Optional[int], extra: str = "") -> str:
        return f"{name} #{r}{extra}" if r is not None else f"{name} -"

    sim = f" (cos {h.similarity:.3f})" if h.similarity is not None else ""
    rel = f"  relevance {h.relevance:.3f}" if h.relevance is not None else ""
    head = (f"{i}. {h.id}  score {h.score:.5f}{rel}"
            + ("  [high importance]" if h.importance == "high" else "")
            + (f"  [stands for {h.duplicates} near-duplicate"
               f"{'s' if h.duplicates != 1 else ''}]" if h.duplicates else ""))
    ranks = "   " + " · ".join([rank("bm25", h.bm25_rank), rank("vector", h.vec_rank, sim),
                                rank("recency", h.recency_rank), rank("access", h.access_rank)])
    import textwrap

    body = textwrap.fill(h.content, width=width, initial_indent="   ", subsequent_indent="   ",
                         max_lines=4, placeholder=" …")
    lines = [head, body, ranks]
    if explain and "relevance" in (h.explain or {}):  # 'hybrid'
        r = h.explain["relevance"]
        a = r["alpha"]
        # the profile's blend of the cosine and the BM25 score, each relative to the
        # query's best (docs/profiles.md), not the hit's absolute relevance of the head line
        blend = a * r["cosine"] + (1 - a) * r["bm25"]
        g = h.explain.get("recency_access_importance", {}).get("nudge", 0.0)
        lines.append(f"   explain: blend {a:g}·cos/best {r['cosine']:.4f} + {1 - a:g}·bm25/best "
                     f"{r['bm25']:.4f} = {blend:.5f}; + (1 − {blend:.5f}) × nudge {g:.4f} "
                     f"(recency/use/importance) = {h.score:.5f}")
    elif explain:
        parts = []
        mult = ""
        for name, e in h.explain.items():
            if not isinstance(e, dict):
                parts.append(f"{name} {e:.4g}" if isinstance(e, float) else f"{name} {e}")
            elif "multiplier" in e:
                mult = f" × {e['multiplier']:.5f} ({name.replace('_', '/')})"
            elif "rank" in e:
                parts.append(f"{name} {e['contribution']:.5f} = "
                             f"{e['weight']:g}/(k+{e['rank']:g})")
            elif "boost" in e:
                parts.append(f"{name} {e['boost']:.5f} = boost")
        body = " + ".join(parts)
        lines.append(f"   explain: ({body}){mult} = {h.score:.5f}" if mult
                     else f"   explain: {body} = {h.score:.5f}")
    return "\n".join(lines)


def _limit(args: argparse.Namespace) -> int:
    """--limit, or the statement's default."""
    from .statements import recall_defaults

    return args.limit if args.limit is not None else recall_defaults()["result_limit"]


def _recall_scope(args: argparse.Namespace) -> Any:
    """The store's ``scope=`` for ``recall``'s ``--scope`` (app.recall_scopes): by default
    the working directory's project (app.derive_scope) and the shared scope; every scope
    for a caller without the option (the demo)."""
    from .app import derive_scope, recall_scopes

    if not hasattr(args, "scope"):
        return None
    return recall_scopes(args.scope, derive_scope() if args.scope is None else None,
                         "--scope")


def _recall(store: Any, args: argparse.Namespace) -> int:
    from .store import StoreError

    try:
        result = store.recall(args.query, limit=_limit(args), weights=_weights(args.weights),
                              k=args.k, pool=args.pool, pool_size=args.pool_size,
                              oversample=getattr(args, "oversample", None),
                              bm25_limit=args.bm25_limit,
                              touch=not args.no_touch, force=args.force,
                              topic_gate=getattr(args, "topic_gate", False),
                              collapse=not getattr(args, "no_collapse", False),
                              session=getattr(args, "session", None),
                              scope=_recall_scope(args),
                              kind=getattr(args, "kind", None),
                              since=_time_arg(getattr(args, "since", None), "--since"),
                              until=_time_arg(getattr(args, "until", None), "--until"),
                              profile=args.profile, alpha=args.alpha,
                              min_similarity=args.min_similarity,
                              min_relevance=getattr(args, "min_relevance", None))
    except StoreError as e:
        raise CliError(str(e)) from None
    if result.skipped:
        print(f"recall skipped: {result.reason}", file=sys.stderr)
    if result.touch_error:
        note(result.touch_error)
    for warning in result.warnings:
        note(warning)
    if args.json:
        keys = ("id", "content", "score", "bm25_rank", "vec_rank", "recency_rank",
                "access_rank", "similarity", "explain", "duplicates", "duplicate_ids",
                "relevance")
        print(json.dumps([{k: getattr(h, k) for k in keys} for h in result], indent=2,
                         ensure_ascii=False))
        return 0
    if not result.skipped and not result.hits:
        print(result.reason or "no episodes matched")
    for i, h in enumerate(result, 1):
        print(_format_hit(i, h, args.explain))
    return 0


def cmd_recall(args: argparse.Namespace) -> int:
    from .relevance import check_min_relevance
    from .store import Store, StoreError

    try:  # check the options before the model loads
        Store._recall_params(_limit(args), _weights(args.weights), args.k, args.pool,
                             args.pool_size, args.bm25_limit, args.profile, args.alpha,
                             args.min_similarity, oversample=args.oversample)
        check_min_relevance(args.min_relevance, "--min-relevance")
    except StoreError as e:
        raise CliError(str(e)) from None
    with _open(args, model="recall") as store:
        return _recall(store, args)


def cmd_stopwords(args: argparse.Namespace) -> int:
    from .stopwords import MIN_ROWS
    from .store import Store

    if not os.path.exists(args.db):
        raise CliError(f"{args.db}: no such database")
    with Store(args.db) as store:
        words = store.refresh_stopwords()
        n = store.meta("bm25_stopwords_rows")
    if args.json:
        print(json.dumps({"episodes": n, "bm25_stopwords": words}))
    elif words:
        print(f"{len(words)} BM25 stopwords (terms in at least half of {n:,} episodes): "
              + " ".join(words))
    else:
        print(f"no BM25 stopwords ({n:,} episodes"
              + (f"; there are none below {MIN_ROWS:,})" if n < MIN_ROWS else ")"))
    return 0


def cmd_maintain(args: argparse.Namespace) -> int:
    from .store import Store, StoreError

    if not os.path.exists(args.db):
        raise CliError(f"{args.db}: no such database")
    import apsw

    try:
        with Store(args.db) as store:
            done = store.maintain()
    except StoreError as e:
        raise CliError(str(e)) from None
    except apsw.BusyError:
        raise CliError(f"{args.db}: another process held the write lock past the busy "
                       "timeout; what was done before is kept; run it again later") from None
    if args.json:
        print(json.dumps(done))
    else:
        print(f"{args.db}: {done['codes_filled']:,} pending codes computed, "
              f"{done['codes_packed']:,} codes packed into blocks, stopwords "
              f"{'refreshed' if done['stopwords_refreshed'] else 'up to date'}, "
              f"{done['fts_merges']:,} full-text index merges")
    return 0


def cmd_path(args: argparse.Namespace) -> int:
    print(loadable_path())
    return 0


def cmd_sql(args: argparse.Namespace) -> int:
    from .resources import recall_statement

    # no pool and no profile: the shipped statement, which chooses them at run time
    sys.stdout.write(recall_statement(args.pool, args.profile))
    return 0


def cmd_knn(args: argparse.Namespace) -> int:
    with _open(args) as store:
        had = store.has_knn
        store.enable_knn()
        n = store.conn.execute("SELECT count(*) FROM episodes_vec").fetchall()[0][0]
    print(f"{args.db}: knn index {'already present' if had else 'created'} ({n} vectors); "
          "recall with --pool knn")
    return 0


DEMO_QUERY = "where are the postgres credentials kept?"
#: Where ``sqlite-rrf demo`` writes when no path is given: a name of its own, never the
#: name of a real memory.
DEMO_DB = "sqlite-rrf-demo.db"
_DEMO_MARK = "demo_sample"


def _check_demo_db(path: str, sample_ids: set) -> None:
    """Refuse to replace ``path`` unless the demo made it: an sqlite-rrf database marked
    as the demo's whose episodes are all the sample's."""
    import apsw

    refuse = (f"{path} exists and is not a database the demo made; the demo never replaces "
              "a database it did not create. Give the demo another path "
              f"(sqlite-rrf demo {DEMO_DB})")
    try:
        conn = apsw.Connection(f"file:{path}?mode=ro", flags=apsw.SQLITE_OPEN_READONLY
                               | apsw.SQLITE_OPEN_URI)
    except apsw.Error:
        raise CliError(refuse) from None
    try:
        mark = conn.execute("SELECT value FROM rrf_meta WHERE key = ?", (_DEMO_MARK,)).fetchall()
        ids = {r[0] for r in conn.execute("SELECT id FROM episodes")}
    except apsw.Error:
        raise CliError(refuse) from None
    finally:
        conn.close()
    if not mark or not ids <= sample_ids:
        raise CliError(refuse)


def cmd_check(args: argparse.Namespace) -> int:
    from .doctor import check_path

    if not os.path.exists(args.db):
        raise CliError(f"{args.db}: no such database")
    report = check_path(args.db, repair_it=args.repair)
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
    else:
        for line in report.repaired:
            print(f"repaired: {line}")
        for f in report.findings:
            print(f"{f.part}: {f.message}" + ("" if f.repairable or not args.repair
                                              else " (not repairable)"))
        if report.ok:
            print(f"ok: nothing wrong ({report.seconds:.2f} s)")
        elif not args.repair and any(f.repairable for f in report.findings):
            print(f"run `sqlite-rrf check {args.db} --repair` to repair what can be")
    return 0 if report.ok else 1


def cmd_demo(args: argparse.Namespace) -> int:
    """Make a fresh demo database from the packaged sample episodes and show one hybrid
    recall of it, with each list's contribution explained."""
    import time

    from .store import Store

    from .resources import data_path

    _check_model_args(args)
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
    embedder = _embedder(args)
    with Store(args.db) as store:
        store.conn.execute("INSERT INTO rrf_meta VALUES (?, 1)", (_DEMO_MARK,))
        if embedder is not None:
            store.attach_embedder(embedder)
        print(f"created {args.db} (schema version {store.stats()['schema_version']})")
        n, _ = _import(store, "sample", episodes, labels, replace=False, quiet=True)
        print(f"imported {n} sample episodes"
              + (f", embedded with {embedder.model_name}" if embedder else
                 " without embeddings: recalling with the BM25, recency and access lists"))
        print(f"\nrecall: {args.query!r}  (pool: the {args.pool_size} most recently accessed "
              "episodes ∪ every BM25 hit)\n")
        ns = argparse.Namespace(query=args.query, limit=args.limit, weights=None, k=None,
                                pool="recent", pool_size=args.pool_size, no_touch=False,
                                force=True, session=None, json=False, explain=True, profile=None,
                                alpha=None, min_similarity=None, bm25_limit=None)
        _recall(store, ns)
    print(f"\nThe same recall in the sqlite3 shell: sqlite3 {args.db}, then "
          f".load {loadable_path()}, .param set :query '...', and `sqlite-rrf sql`'s statement.")
    return 0


def cmd_embed(args: argparse.Namespace) -> int:
    """Backfill the embeddings of episodes that have none."""
    from .store import StoreError

    if args.batch_size < 1:
        raise CliError(f"--batch-size: must be at least 1, got {args.batch_size}")
    with _open(args) as store:
        missing = store.missing_embeddings()
        if not missing:
            print(f"{args.db}: every episode has an embedding")
            return 0
        emb = _embedder(args, remembered=store.model, required=True)
        try:
            store.attach_embedder(emb)
            n = store.embed_missing(batch_size=args.batch_size)
        except StoreError as e:
            raise CliError(str(e)) from None
        finally:
            emb.close()
    print(f"{args.db}: embedded {n} episodes with {emb.model_name}"
          + (f"; {missing - n} still have none" if n < missing else ""))
    return 0


def cmd_model(args: argparse.Namespace) -> int:
    """Fetch the model (into the Hugging Face cache) and print its local path."""
    from .models import ModelNotFoundError, choose_model, resolve_model

    spec = choose_model(args.spec)
    try:
        path = resolve_model(spec)
    except ValueError as e:
        raise CliError(str(e)) from None
    except ModelNotFoundError as e:
        raise CliError(str(e)) from None
    print(f"{spec}\n{path}")
    return 0


# ---- parser ----

DB_HELP = "the memory database (an SQLite file)"
DB_HELP_CREATED = "the memory database (an SQLite file; created if it does not exist)"
#: What each fusion profile does, in a line: ``--profile``'s help (the wheel ships no docs).
PROFILE_SUMMARIES = {
    "hybrid": "the cosine and the BM25 score, each relative to this query's best, half and "
              "half; recency, use and importance only close part of the gap to the top",
    "memory": "RRF of BM25 and vector, with recency and use only breaking near-ties",
    "rrf": "weighted RRF of all four lists (BM25, vector, recency, access)",
    "decay": "four-list RRF boosted for recent episodes, times the episodes' lifecycle "
             "multipliers",
    "weighted": "a blend of relevance (cosine and normalised BM25), an age decay and use",
    "convex": "alpha times the normalised cosine plus (1 - alpha) times the normalised "
              "BM25 score",
}


def _add_model(p: argparse.ArgumentParser) -> None:
    from .models import DEFAULT_MODEL, DEFAULT_N_CTX

    p.add_argument("--model", metavar="MODEL",
                   help="embedding model: a GGUF file or hf:ORG/REPO/FILE.gguf (downloaded once "
                        "into the Hugging Face cache). Default: $SQLITE_RRF_MODEL, else "
                        f"{DEFAULT_MODEL} (a database's own model is loaded only when named)")
    p.add_argument("--n-ctx", type=int_arg, default=DEFAULT_N_CTX, dest="n_ctx",
                   help=f"the model's context in tokens (default {DEFAULT_N_CTX}, right for "
                        "all-MiniLM-L6-v2)")


def _add_recall_options(p: argparse.ArgumentParser) -> None:
    from .relevance import DEFAULT_MIN_RELEVANCE
    from .statements import POOL_MODES, PROFILES, recall_defaults

    # every default is the statement's own (sql/recall/params.sql), read from there
    d = recall_defaults()
    decay_k = recall_defaults("decay")["k"]
    p.add_argument("--limit", type=int_arg, default=None,
                   help=f"how many episodes (default {d['result_limit']})")
    p.add_argument("--json", action="store_true", help="print a JSON list of objects")
    p.add_argument("--explain", action="store_true", help="show each list's contribution")
    p.add_argument("--no-touch", action="store_true",
                   help="do not mark the returned episodes as accessed")
    p.add_argument("--force", action="store_true", help="recall even if the topic gate (on "
                   "with --topic-gate) says the query repeats the previous one")
    p.add_argument("--topic-gate", action="store_true", dest="topic_gate",
                   help="turn the topic gate on (off by default): skip the recall when the "
                        "query's embedding has cosine > 0.85 with the --session's previous one")
    p.add_argument("--no-collapse", action="store_true", dest="no_collapse",
                   help="show near-duplicates as hits of their own, in score order (by "
                        "default they fill one slot, the newest, and among near-ties about "
                        "the same thing the newest ranks first)")
    p.add_argument("--scope", help="only the episodes of this scope ('shared' or '' is the "
                   "shared memory, '*' every scope); default: the working directory's "
                   "project (the name of its git work tree's top directory, else of the "
                   "directory) and the shared scope")
    p.add_argument("--kind", help="only the episodes of this kind")
    p.add_argument("--since", metavar="TIME", help="only episodes created at or after TIME "
                   "(ms since the epoch, or an ISO date/time, UTC)")
    p.add_argument("--until", metavar="TIME", help="only episodes created before TIME")
    p.add_argument("--session", metavar="ID",
                   help="the caller's session: with --topic-gate, the gate compares the query "
                        "with this session's previous one (without a session, a command line "
                        "recall is never gated)")
    p.add_argument("--pool", choices=POOL_MODES, default=None,
                   help=f"vector pool (default {d['pool']}): recent, the most recently "
                        "accessed episodes; all, the nearest of all episodes (exact, one scan "
                        "of the vectors); quantized, the same found through 1-bit codes and "
                        "rescored exactly; knn, sqlite-vec's nearest (needs `sqlite-rrf knn DB`)")
    p.add_argument("--pool-size", type=int_arg, default=None, dest="pool_size",
                   help=f"how many episodes the vector pool holds (default {d['pool_size']})")
    p.add_argument("--oversample", type=int_arg, default=None,
                   help="quantized pool: how many times pool-size candidates the codes "
                        f"select before the exact rescoring (default {d['oversample']})")
    p.add_argument("--bm25-limit", type=int_arg, default=None, dest="bm25_limit",
                   help=f"how many BM25 hits join the candidates (default {d['bm25_limit']})")
    p.add_argument("--k", type=float_arg, default=None,
                   help=f"RRF constant (default {d['k']:g}; {decay_k:g} for the decay profile)")
    p.add_argument("--weights", metavar="B,V,R,A",
                   help="weights of the bm25, vector, recency and access lists (default "
                        f"{d['w_bm25']:g},{d['w_vec']:g},{d['w_recency']:g},{d['w_access']:g})")
    p.add_argument("--profile", choices=PROFILES, default=None,
                   help=f"fusion profile (default {d['profile']}): " + "; ".join(
                       f"{name}: {what}" for name, what in PROFILE_SUMMARIES.items()))
    p.add_argument("--alpha", type=float_arg, default=None,
                   help="hybrid and convex profiles: weight of the cosine against BM25 "
                        f"(default {d['alpha']:g})")
    p.add_argument("--min-similarity", type=float_arg, default=None, dest="min_similarity",
                   help="drop candidates with no BM25 hit and a similarity below this")
    p.add_argument("--min-relevance", type=float_arg, default=None, dest="min_relevance",
                   metavar="R",
                   help="print no hit unless one's relevance (0 to 1, the same scale for every "
                        "query) is at least R (default: no floor; the hook and MCP recall use "
                        f"{DEFAULT_MIN_RELEVANCE:g})")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``sqlite-rrf``."""
    from .statements import POOL_MODES, PROFILES

    parser = argparse.ArgumentParser(
        prog="sqlite-rrf",
        description="Hybrid retrieval in SQLite: an agent memory recalled by one SQL statement.")
    parser.add_argument("--version", action="version", version=f"sqlite-rrf {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("init", help="create or migrate a memory database")
    p.add_argument("db", help="the memory database to create, or to bring to the current "
                   "schema")
    p.set_defaults(func=cmd_init)

    p = sub.add_parser("import", help="import episodes from a JSONL file (one per line)")
    p.add_argument("db", help=DB_HELP_CREATED)
    p.add_argument("file", help="JSONL (what `export` writes): id, content, optional "
                   "embedding (JSON array), created_at, accessed_at (ms since the epoch), "
                   "access_count, importance, kind, metadata, scope; - for stdin")
    p.add_argument("--replace", action="store_true", help="replace episodes whose id exists")
    _add_model(p)
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("add", help="add one episode")
    p.add_argument("db", help=DB_HELP_CREATED)
    p.add_argument("text", help="the episode's text")
    p.add_argument("--id", help="the episode's id (a new one is made when not given)")
    p.add_argument("--importance", choices=("low", "normal", "high"), default="normal")
    p.add_argument("--kind", help="free text stored with the episode (recall --kind filters)")
    p.add_argument("--scope", default="", help="the memory it belongs to: a project, a user "
                   "(default: 'shared', stored as '', the shared memory every project's "
                   "recall includes)")
    _add_model(p)
    p.set_defaults(func=cmd_add)

    p = sub.add_parser("recall", help="the top episodes for a query")
    p.add_argument("db", help=DB_HELP)
    p.add_argument("query", help="what to recall, in plain words")
    _add_recall_options(p)
    _add_model(p)
    p.set_defaults(func=cmd_recall)

    from . import cli_manage  # list, get, update, forget, export, vacuum, stats

    cli_manage.add_parsers(sub, DB_HELP, _add_model)
    p = sub.add_parser("stats", help="counts and facts about a database, by scope")
    p.add_argument("db", help=DB_HELP)
    p.add_argument("--json", action="store_true", help="print them as a JSON object "
                   "(times in ms since the epoch)")
    p.set_defaults(func=cli_manage.cmd_stats)

    p = sub.add_parser("stopwords", help="recompute and print the BM25 stopwords (terms in "
                       "at least half of the episodes, dropped from queries)")
    p.add_argument("db", help=DB_HELP)
    p.add_argument("--json", action="store_true", help="print them as a JSON object")
    p.set_defaults(func=cmd_stopwords)

    p = sub.add_parser("maintain", help="the upkeep a read never does: compute and pack "
                       "pending sign codes, refresh stale BM25 stopwords, merge the full-text "
                       "index")
    p.add_argument("db", help=DB_HELP)
    p.add_argument("--json", action="store_true", help="print what was done as a JSON object")
    p.set_defaults(func=cmd_maintain)

    p = sub.add_parser("path", help="print the loadable extension's path (for .load)")
    p.set_defaults(func=cmd_path)

    p = sub.add_parser("sql", help="print the recall statement")
    p.add_argument("--pool", choices=POOL_MODES, default=None,
                   help="print the statement of this pool only (knn: sqlite-vec's KNN; "
                        "default: the statement that chooses :pool when it runs)")
    p.add_argument("--profile", choices=PROFILES, default=None,
                   help="print the statement of this profile only (default: the statement "
                        "that chooses :profile when it runs)")
    p.set_defaults(func=cmd_sql)

    p = sub.add_parser("knn", help="add the sqlite-vec index for --pool knn")
    p.add_argument("db", help=DB_HELP)
    p.set_defaults(func=cmd_knn)

    p = sub.add_parser("check", help="check the database whole (integrity, full-text index, "
                       "vectors, codes, blocks); --repair fixes what it finds")
    p.add_argument("db", help=DB_HELP)
    p.add_argument("--repair", action="store_true",
                   help="repair what the check finds, in one transaction")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("embed", help="embed the episodes that have no embedding (batched, "
                       "resumable)")
    p.add_argument("db", help=DB_HELP)
    p.add_argument("--batch-size", type=int_arg, default=64, dest="batch_size",
                   help="episodes per batch; each batch is written all or nothing (default 64)")
    _add_model(p)
    p.set_defaults(func=cmd_embed)

    p = sub.add_parser("model", help="download a model into the Hugging Face cache (if it is "
                       "not there) and print its local path")
    p.add_argument("spec", nargs="?", metavar="MODEL",
                   help="a GGUF file or hf:ORG/REPO/FILE.gguf (default: $SQLITE_RRF_MODEL, else "
                        "the default model)")
    p.set_defaults(func=cmd_model)

    p = sub.add_parser("demo", help="make a demo database from the packaged sample episodes "
                       "and show one hybrid recall of it, each list's part explained")
    p.add_argument("db", nargs="?", default=DEMO_DB,
                   help=f"where the demo database goes (default {DEMO_DB}); an existing file "
                        "is replaced only if the demo made it")
    p.add_argument("--query", default=DEMO_QUERY, help="the query of the demo's recall")
    p.add_argument("--limit", type=int_arg, default=None,
                   help="how many episodes it shows (default: recall's)")
    p.add_argument("--pool-size", type=int_arg, default=10, dest="pool_size",
                   help="the recent pool (small, so the sample shows BM25 rescuing an old "
                        "episode; default 10)")
    _add_model(p)
    p.set_defaults(func=cmd_demo)

    # The agents' ways in: their modules import their own dependencies (the mcp SDK) only
    # when the command runs.
    from . import hook, mcp_server, server

    p = sub.add_parser("serve", help="one warm process for the hook (a Unix socket) and MCP "
                       "over streamable HTTP (--http): the model and the connection stay "
                       "loaded")
    server.add_arguments(p)
    _add_model(p)
    p.set_defaults(func=server.run)

    p = sub.add_parser("mcp", help="serve the memory to agents over the Model Context Protocol "
                       "(stdio; needs the mcp extra)")
    mcp_server.add_arguments(p)
    _add_model(p)
    p.set_defaults(func=mcp_server.run)

    p = sub.add_parser("hook", help="an agent's prompt hook: read the hook's JSON on stdin, "
                       "print the recollection as Markdown")
    hook.add_arguments(p)
    _add_model(p)
    p.set_defaults(func=hook.run)

    from .evaluation import cli as evaluation_cli

    evaluation_cli.add_parser(sub)
    from . import replicate  # replicate, restore (Litestream: the replicate extra)

    replicate.add_parsers(sub, DB_HELP)
    return parser


def _known_error(e: Exception) -> Optional[str]:
    """The one-line report of an error the command line expects (bad input; a database,
    extension or model it cannot use), or None for a fault of ours
    (:func:`sqlite_rrf.app.error_message`)."""
    return error_message(e)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line; returns the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["hook"]:  # per prompt: its own small parser, no other command's imports
        from . import hook

        return hook.main(argv[1:])
    if argv[:1] and argv[0] in ("ls", "rm", "edit"):  # cli_manage.ALIASES
        from .cli_manage import ALIASES

        argv[0] = ALIASES[argv[0]]
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except CliError as e:
        print(f"sqlite-rrf: {e}", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:  # e.g. `sqlite-rrf stats DB --json | head`
        return 0
    except KeyboardInterrupt:
        print("sqlite-rrf: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        where = f"{args.db}: " if getattr(args, "db", None) else ""
        known = _known_error(e)
        if known is not None:
            print(f"sqlite-rrf: {where}{known}", file=sys.stderr)
            return EXIT_ERROR
        if os.environ.get("SQLITE_RRF_DEBUG"):  # a fault of ours: one line, unless asked
            raise
        print(f"sqlite-rrf: {where}{fault_message(e)}", file=sys.stderr)
        return EXIT_ERROR
