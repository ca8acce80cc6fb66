"""The command line's commands for a memory's whole life: ``list`` (``ls``), ``get``,
``update`` (``edit``), ``forget`` (``rm``), ``export``, ``vacuum`` and ``stats``: their
arguments (:func:`add_parsers`) and what they print. The operations themselves are
:mod:`sqlite_rrf.app.manage`'s, on a store opened by :func:`sqlite_rrf.app.open_store`.

Like :mod:`sqlite_rrf.cli`, this module imports only the standard library and
:mod:`sqlite_rrf.app` at module level: the parser is built on every run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, Optional

    from ..app.manage import Filters
    from ..store import Store

from ..app import UserError, close_store, int_arg, note, open_store, parse_time

#: Other names of the commands (``sqlite-rrf ls`` is ``sqlite-rrf list``).
ALIASES = {"ls": "list", "rm": "forget", "edit": "update"}

#: How many of the episodes a ``forget`` without ``--yes`` would delete it shows.
FORGET_PREVIEW = 10

#: ``forget`` says that ``vacuum`` would give space back once the free pages reach this.
VACUUM_HINT_BYTES = 1 << 20


def _open(args: argparse.Namespace, use: Optional[str] = None) -> Store:
    return open_store(
        args.db, use, model=getattr(args, "model", None), n_ctx=getattr(args, "n_ctx", None)
    )


def _filters(args: argparse.Namespace) -> Filters:
    from ..app.manage import Filters

    return Filters(
        scope=args.scope,
        kind=args.kind,
        since=parse_time(args.since, "--since"),
        until=parse_time(args.until, "--until"),
    )


def size_text(n: int) -> str:
    """Bytes for people: ``2.6 MB``, ``310 kB``, ``812 bytes`` (powers of 1000)."""
    if n >= 1_000_000:
        return f"{n / 1e6:.1f} MB"
    if n >= 1_000:
        return f"{n / 1e3:.0f} kB"
    return f"{n} bytes"


def shown(text: Any, newlines: bool = False) -> str:
    """``text`` safe for a terminal: its control characters (an escape sequence, a
    carriage return; line breaks too unless ``newlines``) written as ``\\x1b``, so that a
    text written by any client cannot forge or hide output. Tabs stay."""
    import unicodedata

    return "".join(
        ch
        if ch == "\t" or (newlines and ch == "\n") or unicodedata.category(ch) != "Cc"
        else f"\\x{ord(ch):02x}"
        for ch in str(text)
    )


def _head(rec: Dict[str, Any], now: int) -> str:
    """An episode's line in ``list``: id, created (and confirmed), scope, kind, importance."""
    from ..app.display import noted

    return (
        f"{shown(rec['id'])}  {noted(rec['created_at'], rec.get('confirmed_at'), now)}  "
        f"scope {shown(rec['scope'])}"
        + (f"  kind {shown(rec['kind'])}" if rec["kind"] is not None else "")
        + (f"  [{rec['importance']} importance]" if rec["importance"] != "normal" else "")
        + (
            f"  [replaced by {shown(rec['superseded_by'])}]"
            if rec.get("superseded_by") is not None
            else ""
        )
    )


#: The width ``list`` and ``get`` wrap an episode's text to.
WRAP_WIDTH = 100


def _summary(rec: Dict[str, Any], lines: int = 2, width: int = WRAP_WIDTH) -> str:
    import textwrap

    from ..app import flatten

    return textwrap.fill(
        flatten(rec["content"]),
        width=width,
        initial_indent="   ",
        subsequent_indent="   ",
        max_lines=lines,
        placeholder=" …",
    )


def _print_episode(rec: Dict[str, Any], db: str, now: int) -> None:
    """Everything about one episode (``get``, ``update``)."""
    from ..app.display import noted, when

    emb = (
        f"{rec['embedding_dim']} dimensions"
        if rec.get("embedding_dim")
        else f"none (`sqlite-rrf embed {db}` adds it)"
    )
    rows = [
        ("id", rec["id"]),
        ("scope", rec["scope"]),
        ("kind", rec["kind"] if rec["kind"] is not None else "-"),
        ("importance", rec["importance"]),
        ("created", noted(rec["created_at"], rec.get("confirmed_at"), now)),
        ("accessed", when(rec["accessed_at"], now)),
        ("accesses", rec["access_count"]),
        ("embedding", emb),
    ]
    if rec.get("superseded_by") is not None:
        rows.append(
            (
                "replaced by",
                f"{rec['superseded_by']} (this fact is kept; recalls leave it out unless "
                "--include-superseded)",
            )
        )
    if rec.get("replaced"):
        rows.append(("replaces", ", ".join(rec["replaced"])))
    rows += [
        (
            "metadata",
            "-" if rec["metadata"] is None else json.dumps(rec["metadata"], ensure_ascii=False),
        ),
    ]
    for k, v in rows:
        print(f"{k:>11}: {shown(v)}")
    print(f"{'content':>11}:")
    import textwrap

    for line in rec["content"].split("\n"):  # long lines wrapped as list wraps them
        text = shown(line)
        lead = "   " + text[: len(text) - len(text.lstrip(" "))]  # the line's own indent
        wrapped = textwrap.wrap(text, width=WRAP_WIDTH, initial_indent=lead, subsequent_indent=lead)
        for part in wrapped or [""]:
            print(part)


def _now() -> int:
    from ..store import now_ms

    return now_ms()


# ---- commands ----


def cmd_list(args: argparse.Namespace) -> int:
    """``sqlite-rrf list``."""
    from ..app.manage import list_episodes

    filters = _filters(args)
    limit = args.limit
    if limit < 0:
        raise UserError(f"--limit: must be 0 (every episode) or more, got {limit}")
    store = _open(args)
    try:
        recs, total = list_episodes(
            store, filters, limit or None, include_superseded=getattr(args, "all", False)
        )
    finally:
        close_store(store)
    if args.json:
        for rec in recs:
            print(json.dumps(rec, ensure_ascii=False))
        return 0
    now = _now()
    if not recs:
        print("no episodes" + (f" match ({shown(filters.describe())})" if filters.given else ""))
    for rec in recs:
        print(_head(rec, now))
        print(_summary(rec))
    if total > len(recs):
        print(f"({len(recs)} of {total} shown, newest first; --limit N shows more, --limit 0 all)")
    return 0


def cmd_get(args: argparse.Namespace) -> int:
    """``sqlite-rrf get``."""
    from ..app.manage import get_episode

    store = _open(args)
    try:
        rec = get_episode(store, args.id)
    finally:
        close_store(store)
    if args.json:
        print(json.dumps(rec, indent=2, ensure_ascii=False))
    else:
        _print_episode(rec, args.db, _now())
    return 0


def _metadata_arg(text: Optional[str]) -> Any:
    if text is None:
        return None
    try:
        md = json.loads(text)
    except (ValueError, RecursionError) as e:
        why = e.msg if isinstance(e, json.JSONDecodeError) else "not JSON"
        raise UserError(
            f'--metadata: expected a JSON object such as \'{{"source": '
            f'"notes"}}\', got {text!r} ({why})'
        ) from None
    if not isinstance(md, dict):
        raise UserError(
            f'--metadata: expected a JSON object such as \'{{"source": '
            f'"notes"}}\', got {text!r} (--no-metadata removes it)'
        )
    return md


def cmd_update(args: argparse.Namespace) -> int:
    """``sqlite-rrf update``."""
    from ..app import check_model_args
    from ..app.manage import update_episode

    metadata = _metadata_arg(args.metadata)
    if args.metadata is not None and args.no_metadata:
        raise UserError("update: --metadata and --no-metadata contradict each other")
    if args.text is not None and not args.text.strip():
        raise UserError("--text: the new text is empty")
    check_model_args(args.model, args.n_ctx)
    # only a new text is embedded: the model loads for it alone
    store = _open(args, "write" if args.text is not None else None)
    try:
        rec = update_episode(
            store,
            args.id,
            content=args.text,
            importance=args.importance,
            kind=args.kind,
            metadata=metadata,
            scope=args.scope,
            clear_metadata=args.no_metadata,
        )
    finally:
        close_store(store)
    if args.json:
        print(json.dumps(rec, indent=2, ensure_ascii=False))
    else:
        print(f"updated {rec['id']}")
        _print_episode(rec, args.db, _now())
    return 0


def cmd_forget(args: argparse.Namespace) -> int:
    """``sqlite-rrf forget``."""
    from ..app.manage import forget, list_episodes, matching_ids, reclaimable_bytes

    filters = _filters(args)
    if args.ids and filters.given:
        raise UserError(
            "forget: give the ids of the episodes to forget, or filters "
            "(--scope, --kind, --since, --until), not both"
        )
    if not args.ids and not filters.given:
        raise UserError(
            "forget: give the ids of the episodes to forget, or filters "
            "(--scope S, --kind K, --since T, --until T; --scope '*' is every "
            "episode)"
        )
    store = _open(args)
    try:
        if args.ids:
            ids = list(args.ids)
            what = ""
        else:
            ids = matching_ids(store, filters)
            what = f" ({shown(filters.describe())})"
            if not ids:
                print(f"no episodes match{what}: nothing to forget")
                return 0
            if not args.yes:
                recs, total = list_episodes(store, filters, FORGET_PREVIEW)
                now = _now()
                print(f"{total} episode{'s' if total != 1 else ''} match{what}:")
                for rec in recs:
                    print(_head(rec, now))
                    print(_summary(rec, lines=1))
                if total > len(recs):
                    print(f"… and {total - len(recs)} more")
                raise UserError(
                    "forget: nothing was forgotten; pass --yes to forget "
                    + (f"these {total} episodes" if total != 1 else "this episode")
                )
        n = forget(store, ids)
        free = reclaimable_bytes(store)
    finally:
        close_store(store)
    hint = (
        f"; the file keeps its size until `sqlite-rrf vacuum {args.db}` gives "
        f"{size_text(free)} or more back"
        if free >= VACUUM_HINT_BYTES
        else ""
    )
    print(f"forgot {n} episode{'s' if n != 1 else ''}{what}{hint}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """``sqlite-rrf export``."""
    from ..app.files import check_output
    from ..app.manage import export_lines, is_export

    filters = _filters(args)
    if args.output not in (None, "-"):
        # never over the database it reads (nor its -wal/-shm), nor a file it did not write
        check_output(
            args.output,
            option="-o",
            databases=[args.db],
            force=getattr(args, "force", False),
            ours=is_export,
            what="export",
        )
    store = _open(args)
    n = 0
    lines = export_lines(store, filters, embeddings=not args.no_embeddings)
    try:
        if args.output in (None, "-"):
            for line in lines:
                sys.stdout.write(line)
                n += 1
            sys.stdout.flush()
            return 0
        from ..app.files import atomic_writer

        try:
            with atomic_writer(args.output) as f:  # the file appears whole, or not at all
                for line in lines:
                    f.write(line)
                    n += 1
        except OSError as e:
            raise UserError(f"-o: {args.output}: {e.strerror or e}; nothing was written") from None
    finally:
        lines.close()  # its read transaction ends before the store closes
        close_store(store)
    print(f"exported {n} episode{'s' if n != 1 else ''} from {args.db} to {args.output}")
    return 0


def cmd_vacuum(args: argparse.Namespace) -> int:
    """``sqlite-rrf vacuum``."""
    from ..app.manage import vacuum

    if not os.path.exists(args.db):
        raise UserError(f"{args.db}: no such database")
    store = _open(args)
    try:
        done = vacuum(store)
    finally:
        close_store(store)
    if not done["wal_emptied"]:
        note(
            f"another process is reading {args.db}, so the rebuilt file waits in its -wal "
            f"file ({size_text(done['wal_bytes'])}): the space is given back at the next "
            "checkpoint (at the latest when the last connection closes), or by `sqlite-rrf "
            f"vacuum {args.db}` again"
        )
    if args.json:
        print(json.dumps(done))
        return 0
    before, after = done["size_before"], done["size_after"]
    print(
        f"{args.db}: {size_text(before)} -> {size_text(after)} "
        f"({size_text(max(0, before - after))} given back to the disk)"
    )
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    """``sqlite-rrf stats``."""
    from ..app.display import when
    from ..app.manage import stats

    if not os.path.exists(args.db):
        raise UserError(f"{args.db}: no such database")
    store = _open(args)
    try:
        st = stats(store)
    finally:
        close_store(store)
    if args.json:
        print(json.dumps(st, indent=2, ensure_ascii=False))
        return 0
    now = _now()
    table = dict(st)
    for k in ("oldest_created_at", "newest_created_at"):
        table[k] = when(st[k], now)
    for k in ("by_importance", "by_scope"):
        table[k] = ", ".join(f"{name} {n}" for name, n in st[k].items()) or "-"
    table["size_bytes"] = f"{size_text(st['size_bytes'])} ({st['size_bytes']:,} bytes)"
    table["bm25_stopwords"] = " ".join(st["bm25_stopwords"]) or "-"
    for k in ("embedding_model", "embedding_dim"):
        table[k] = "-" if st[k] is None else st[k]
    for k, v in table.items():
        print(f"{k:>18}: {shown(v)}")
    return 0


# ---- the parsers ----


def _add_filters(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--scope",
        help=f"only {what} of this scope (shared or '' is the shared "
        "memory, '*' every scope; default: every scope)",
    )
    p.add_argument("--kind", help=f"only {what} of this kind")
    p.add_argument(
        "--since",
        metavar="TIME",
        help=f"only {what} created at or after TIME: an ISO date/time (UTC), 'yesterday', "
        "'2 days ago', 'last week' (its start), or ms since the epoch",
    )
    p.add_argument(
        "--until",
        metavar="TIME",
        help=f"only {what} created before TIME (as --since; a day or week named counts "
        "whole: --since yesterday --until yesterday is yesterday)",
    )


def add_parsers(sub: Any, db_help: str, add_model: Any) -> None:
    """Register ``list``, ``get``, ``update``, ``forget``, ``export`` and ``vacuum`` on
    the command line's subparsers (``add_model`` adds ``--model`` and ``--n-ctx``)."""
    from ..app import SHARED_SCOPE
    from ..app.manage import DEFAULT_LIST_LIMIT

    p = sub.add_parser("list", help="the episodes, newest first, with their dates (also `ls`)")
    p.add_argument("db", help=db_help)
    _add_filters(p, "the episodes")
    p.add_argument(
        "--limit",
        type=int_arg,
        default=DEFAULT_LIST_LIMIT,
        help=f"how many (default {DEFAULT_LIST_LIMIT}; 0: all)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object per line (times in ms since the epoch)",
    )
    p.add_argument(
        "--all",
        action="store_true",
        help="also the facts another one replaced (add --replaces), marked [replaced by ID]",
    )
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("get", help="everything about one episode")
    p.add_argument("db", help=db_help)
    p.add_argument("id", help="the episode's id")
    p.add_argument("--json", action="store_true", help="print it as a JSON object")
    p.set_defaults(func=cmd_get)

    p = sub.add_parser(
        "update", help="change an episode's text, kind, importance, metadata or scope (also `edit`)"
    )
    p.add_argument("db", help=db_help)
    p.add_argument("id", help="the episode's id")
    p.add_argument(
        "--text",
        "--content",
        dest="text",
        help="the new text (embedded again; the old text no longer matches)",
    )
    p.add_argument("--importance", choices=("low", "normal", "high"))
    p.add_argument("--kind", help="the new kind ('' clears it)")
    p.add_argument(
        "--metadata", metavar="JSON", help="the new metadata, a JSON object (replaces the old)"
    )
    p.add_argument(
        "--no-metadata", action="store_true", dest="no_metadata", help="remove the metadata"
    )
    p.add_argument(
        "--scope", help=f"move it to this scope ({SHARED_SCOPE} or '' is the shared memory)"
    )
    p.add_argument("--json", action="store_true", help="print the episode as a JSON object")
    add_model(p)
    p.set_defaults(func=cmd_update)

    p = sub.add_parser(
        "forget", help="delete episodes by id, or those that match filters (with --yes) (also `rm`)"
    )
    p.add_argument("db", help=db_help)
    p.add_argument("ids", nargs="*", metavar="ID", help="the ids of the episodes to delete")
    _add_filters(p, "the episodes")
    p.add_argument(
        "--yes",
        action="store_true",
        help="delete what the filters match (without it, they are only shown)",
    )
    p.set_defaults(func=cmd_forget)

    p = sub.add_parser("export", help="the episodes as JSONL, everything `import` reads back")
    p.add_argument("db", help=db_help)
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="write to FILE (default: stdout); never the database itself or its -wal/-shm, "
        "nor an existing file that is not an earlier export unless --force",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="replace an existing FILE that is not an earlier export",
    )
    _add_filters(p, "the episodes")
    p.add_argument(
        "--no-embeddings",
        action="store_true",
        dest="no_embeddings",
        help="leave the embeddings out (import embeds them again)",
    )
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("vacuum", help="give the space of deleted episodes back to the disk")
    p.add_argument("db", help=db_help)
    p.add_argument("--json", action="store_true", help="print the sizes as a JSON object")
    p.set_defaults(func=cmd_vacuum)
