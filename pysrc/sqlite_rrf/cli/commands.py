"""The command line's commands on one database (``init``, ``import``, ``add``,
``stopwords``, ``maintain``, ``knn``, ``check``, ``embed``) and the ones on none (``path``,
``sql``, ``model``). ``recall`` is :mod:`.recall`'s, ``demo`` :mod:`.demo`'s, the
commands of a memory's life :mod:`.manage`'s."""

from __future__ import annotations

import argparse
import json
import os
import sys

TYPE_CHECKING = False  # typing is not imported at run time: `sqlite-rrf hook` starts fast
if TYPE_CHECKING:
    from typing import Any, Tuple

from .. import loadable_path
from ..app import UserError, note, stored_scope
from .common import CliError, embedder_for, open_db


def n_episodes(n: int) -> str:
    """``1 episode``, ``2 episodes``."""
    return f"{n} episode{'' if n == 1 else 's'}"


def cmd_init(args: argparse.Namespace) -> int:
    from ..store import Store

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
                raise CliError(
                    f"{path}: line {n}: not valid UTF-8 (byte {e.object[e.start]:#04x} "
                    "cannot be decoded); nothing was imported"
                ) from None
            if not line:
                break
            if not line.strip():
                continue
            try:
                ep = json.loads(line)
            except json.JSONDecodeError as e:
                raise CliError(
                    f"{path}: line {n}: invalid JSON ({e.msg} at column {e.colno}); "
                    "nothing was imported"
                ) from None
            except (ValueError, RecursionError) as e:  # a 5,000-digit number, deep nesting
                why = "nested too deeply" if isinstance(e, RecursionError) else str(e)
                raise CliError(
                    f"{path}: line {n}: invalid JSON ({why}); nothing was imported"
                ) from None
            if not isinstance(ep, dict):
                raise CliError(f"{path}: line {n}: expected a JSON object; nothing was imported")
            unknown = set(ep) - {
                "id",
                "content",
                "embedding",
                "created_at",
                "accessed_at",
                "access_count",
                "importance",
                "kind",
                "metadata",
                "scope",
                "replaces",
                "superseded_by",
                "confirmed_at",
                "invalid_utf8",
            }
            if unknown:
                raise CliError(
                    f"{path}: line {n}: unknown field(s) {sorted(unknown)}; nothing was imported"
                )
            if isinstance(ep.get("scope"), str):  # 'shared' is the shared scope, as stored ''
                try:
                    ep["scope"] = stored_scope(ep["scope"], "scope")
                except UserError as e:
                    raise CliError(f"{path}: line {n}: {e}; nothing was imported") from None
            ep.pop("invalid_utf8", None)  # an export's note of bytes that were not UTF-8
            episodes.append(ep)
            labels.append(f"line {n}")
    return episodes, labels


def import_episodes(
    store: Any, path: str, episodes: list, labels: list, replace: bool, quiet: bool = False
) -> Tuple[int, str]:
    """Import the episodes; returns how many were stored and what to say about the
    repeated ones."""
    from ..store import StoreError

    try:
        ids = store.add_many(
            episodes,
            labels=labels,
            replace=replace,
            progress=None if not quiet else False,
            skip_superseded=True,
        )
    except StoreError as e:
        raise CliError(f"{path}: {e}; nothing was imported") from None
    kept_out = len(ids.superseded)
    return len(ids) - len(ids.duplicates) - kept_out, _repeated(ids) + _kept_out(ids)


def _kept_out(ids: Any) -> str:
    """What to add to the import's line about texts that another fact replaced."""
    if not ids.superseded:
        return ""
    n = len(ids.superseded)
    first, by = next(iter(ids.superseded.values()))
    return (
        f"; {n} {'is the text' if n == 1 else 'are texts'} of a fact another one "
        f"replaced (e.g. {first}, replaced by {by}): not imported, the newer fact stays"
    )


def _repeated(ids: Any) -> str:
    """What to add to the import's line about the episodes that repeated a text of their
    scope (Store.add_many's ``duplicates`` and ``repeats``); '' when none did."""
    said = []
    if ids.duplicates:
        n = len(ids.duplicates)
        said.append(
            f"{n} repeated a text already stored in {'its' if n == 1 else 'their'} "
            "scope (the same after normalising case and white space): no copy was "
            "stored; the episode with that text was refreshed"
        )
    if ids.repeats:
        n = len(ids.repeats)
        said.append(
            f"{n} {'has an id of its' if n == 1 else 'have ids of their'} own and "
            "repeated a text of the scope: stored all the same"
        )
    return "; " + "; ".join(said) if said else ""


def cmd_import(args: argparse.Namespace) -> int:
    episodes, labels = read_jsonl(args.file)
    need_embed = any(ep.get("embedding") is None for ep in episodes)
    with open_db(args, model="write" if need_embed else None, must_exist=False) as store:
        n, repeated = import_episodes(store, args.file, episodes, labels, args.replace)
    print(f"imported {n_episodes(n)} into {args.db}{repeated}")
    return 0


def cmd_add(args: argparse.Namespace) -> int:
    from ..store import StoreError

    replaces = getattr(args, "replaces", None)
    with open_db(args, model="write", must_exist=False) as store:
        try:
            ids = store.add_many(
                [
                    dict(
                        content=args.text,
                        id=args.id,
                        importance=args.importance,
                        kind=args.kind,
                        scope=stored_scope(args.scope, "--scope"),
                        replaces=replaces,
                    )
                ]
            )
        except StoreError as e:
            raise CliError(str(e).replace("replaces:", "--replaces:", 1)) from None
        near = None if (replaces or ids.duplicates) else store.likely_update(ids[0])
    if ids.duplicates:
        note(
            f"the scope already had this text (the same after normalising case and white "
            f"space): no copy was stored; episode {ids[0]} was refreshed"
        )
    if ids.superseded:
        old, by = ids.superseded[0]
        note(
            f"this text is that of episode {old}, which {by} replaced: it stays replaced; "
            f"to make it current again, add it with --replaces {by}"
        )
    if replaces and replaces != ids[0]:
        note(
            f"episode {replaces} is replaced by {ids[0]}: it is kept, and recalls leave it "
            "out (recall --include-superseded shows it)"
        )
    if near is not None:
        other, cos, what = near
        note(
            f"this may update episode {other} (cos {cos:.2f}, it differs in {what}): "
            f"`sqlite-rrf update {args.db} {other} --text ...`, or add with --replaces {other}"
        )
    print(ids[0])
    return 0


def cmd_stopwords(args: argparse.Namespace) -> int:
    from ..core.stopwords import MIN_ROWS
    from ..store import Store

    if not os.path.exists(args.db):
        raise CliError(f"{args.db}: no such database")
    with Store(args.db) as store:
        words = store.refresh_stopwords()
        n = store.meta("bm25_stopwords_rows")
    if args.json:
        print(json.dumps({"episodes": n, "bm25_stopwords": words}))
    elif words:
        print(
            f"{len(words)} BM25 stopwords (terms in at least half of {n:,} episodes): "
            + " ".join(words)
        )
    else:
        print(
            f"no BM25 stopwords ({n:,} episodes"
            + (f"; there are none below {MIN_ROWS:,})" if n < MIN_ROWS else ")")
        )
    return 0


def cmd_maintain(args: argparse.Namespace) -> int:
    from ..store import Store, StoreError

    if not os.path.exists(args.db):
        raise CliError(f"{args.db}: no such database")
    import apsw

    try:
        with Store(args.db) as store:
            done = store.maintain()
    except StoreError as e:
        raise CliError(str(e)) from None
    except apsw.BusyError:
        raise CliError(
            f"{args.db}: another process held the write lock past the busy "
            "timeout; what was done before is kept; run it again later"
        ) from None
    if args.json:
        print(json.dumps(done))
    else:
        print(
            f"{args.db}: {done['codes_filled']:,} pending codes computed, "
            f"{done['codes_packed']:,} codes packed into blocks, stopwords "
            f"{'refreshed' if done['stopwords_refreshed'] else 'up to date'}, "
            f"{done['fts_merges']:,} full-text index merges"
        )
    return 0


def cmd_path(args: argparse.Namespace) -> int:
    print(loadable_path())
    return 0


def cmd_sql(args: argparse.Namespace) -> int:
    from ..core.statements import recall_statement

    # the statement of one pool and one profile; neither named: sql/recall.sql, the default's
    sys.stdout.write(recall_statement(args.pool, args.profile))
    return 0


def cmd_knn(args: argparse.Namespace) -> int:
    with open_db(args) as store:
        had = store.has_knn
        store.enable_knn()
        n = store.knn_vectors()
    print(
        f"{args.db}: knn index {'already present' if had else 'created'} ({n} vectors); "
        "recall with --pool knn"
    )
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from ..doctor import check_path

    if not os.path.exists(args.db):
        raise CliError(f"{args.db}: no such database")
    report = check_path(args.db, repair_it=args.repair)
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
    else:
        for line in report.repaired:
            print(f"repaired: {line}")
        for f in report.findings:
            print(
                f"{f.part}: {f.message}"
                + ("" if f.repairable or not args.repair else " (not repairable)")
            )
        if report.ok:
            print(f"ok: nothing wrong ({report.seconds:.2f} s)")
        elif not args.repair and any(f.repairable for f in report.findings):
            print(f"run `sqlite-rrf check {args.db} --repair` to repair what can be")
    return 0 if report.ok else 1


def cmd_embed(args: argparse.Namespace) -> int:
    """Backfill the embeddings of episodes that have none."""
    from ..store import StoreError

    if args.batch_size < 1:
        raise CliError(f"--batch-size: must be at least 1, got {args.batch_size}")
    with open_db(args) as store:
        missing = store.missing_embeddings()
        if not missing:
            print(f"{args.db}: every episode has an embedding")
            return 0
        emb = embedder_for(args, remembered=store.model, required=True)
        try:
            store.attach_embedder(emb)
            n = store.embed_missing(batch_size=args.batch_size)
        except StoreError as e:
            raise CliError(str(e)) from None
        finally:
            emb.close()
    print(
        f"{args.db}: embedded {n_episodes(n)} with {emb.model_name}"
        + (
            f"; {missing - n} still {'has' if missing - n == 1 else 'have'} none"
            if n < missing
            else ""
        )
    )
    return 0


def cmd_model(args: argparse.Namespace) -> int:
    """Fetch the model (into the Hugging Face cache) and print its local path."""
    from ..embedding.models import ModelNotFoundError, choose_model, resolve_model

    spec = choose_model(args.spec)
    try:
        path = resolve_model(spec)
    except ValueError as e:
        raise CliError(str(e)) from None
    except ModelNotFoundError as e:
        raise CliError(str(e)) from None
    print(f"{spec}\n{path}")
    return 0
