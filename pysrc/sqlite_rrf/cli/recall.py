"""``sqlite-rrf recall``: the options checked before the model loads, the recall, and
each hit printed (with ``--explain``, each list's part of its score)."""

from __future__ import annotations

import argparse
import json
import sys

TYPE_CHECKING = False  # typing is not imported at run time: `sqlite-rrf hook` starts fast
if TYPE_CHECKING:
    from typing import Any, Dict, Optional

from ..app import explain_in_words, note, parse_time, ranks_in_words
from .common import CliError, open_db, weights_arg


def format_hit(
    i: int, h: Any, explain: bool, width: int = 100, replaced_by: Optional[str] = None
) -> str:
    """Hit ``i`` as ``sqlite-rrf recall`` prints it: its id, score and relevance, its text,
    its rank in each list and, with ``explain``, how its score was made; ``replaced_by``:
    the fact that replaced it (``--include-superseded`` shows such hits)."""
    rel = f"  relevance {h.relevance:.3f}" if h.relevance is not None else ""
    head = (
        f"{i}. {h.id}  score {h.score:.5f}{rel}"
        + ("  [high importance]" if h.importance == "high" else "")
        + (
            f"  [stands for {h.duplicates} near-duplicate{'s' if h.duplicates != 1 else ''}]"
            if h.duplicates
            else ""
        )
        + (f"  [replaced by {replaced_by}]" if replaced_by else "")
    )
    ranks = "   " + ranks_in_words(
        h.bm25_rank, h.vec_rank, h.recency_rank, h.access_rank, h.similarity
    )
    import textwrap

    body = textwrap.fill(
        h.content,
        width=width,
        initial_indent="   ",
        subsequent_indent="   ",
        max_lines=4,
        placeholder=" …",
    )
    lines = [head, body, ranks]
    if explain and h.explain:
        lines.append(f"   explain: {explain_in_words(h.explain, h.score, digits=5)}")
    return "\n".join(lines)


def result_limit(args: argparse.Namespace) -> int:
    """--limit, or the statement's default."""
    from ..core.statements import recall_defaults

    return args.limit if args.limit is not None else recall_defaults()["result_limit"]


def recall_scope_arg(args: argparse.Namespace) -> Any:
    """The store's ``scope=`` for ``recall``'s ``--scope`` (app.recall_scopes): by default
    the working directory's project (app.derive_scope) and the shared scope; every scope
    for a caller without the option (the demo)."""
    from ..app import derive_scope, recall_scopes

    if not hasattr(args, "scope"):
        return None
    return recall_scopes(args.scope, derive_scope() if args.scope is None else None, "--scope")


def recall_and_print(store: Any, args: argparse.Namespace) -> int:
    from ..store import StoreError

    try:
        result = store.recall(
            args.query,
            limit=result_limit(args),
            weights=weights_arg(args.weights),
            k=args.k,
            pool=args.pool,
            pool_size=args.pool_size,
            oversample=getattr(args, "oversample", None),
            bm25_limit=args.bm25_limit,
            touch=not args.no_touch,
            force=args.force,
            topic_gate=getattr(args, "topic_gate", False),
            collapse=not getattr(args, "no_collapse", False),
            session=getattr(args, "session", None),
            scope=recall_scope_arg(args),
            kind=getattr(args, "kind", None),
            since=parse_time(getattr(args, "since", None), "--since"),
            until=parse_time(getattr(args, "until", None), "--until"),
            profile=args.profile,
            alpha=args.alpha,
            min_similarity=args.min_similarity,
            min_relevance=getattr(args, "min_relevance", None),
            include_superseded=getattr(args, "include_superseded", False),
        )
    except StoreError as e:
        raise CliError(str(e)) from None
    if result.skipped:
        print(f"recall skipped: {result.reason}", file=sys.stderr)
    if result.touch_error:
        note(result.touch_error)
    for warning in result.warnings:
        note(warning)
    if args.json:
        keys = (
            "id",
            "content",
            "score",
            "bm25_rank",
            "vec_rank",
            "recency_rank",
            "access_rank",
            "similarity",
            "explain",
            "duplicates",
            "duplicate_ids",
            "relevance",
            "fused_score",
        )
        print(
            json.dumps(
                [{k: getattr(h, k) for k in keys} for h in result], indent=2, ensure_ascii=False
            )
        )
        return 0
    if not result.skipped and not result.hits:
        print(result.reason or "no episodes matched")
    replaced: Dict[int, Optional[str]] = {}
    if getattr(args, "include_superseded", False) and result.hits:
        facts = store.hit_facts([h.rowid for h in result])
        replaced = {r: f[2] for r, f in facts.items()}
    for i, h in enumerate(result, 1):
        print(format_hit(i, h, args.explain, replaced_by=replaced.get(h.rowid)))
    return 0


def cmd_recall(args: argparse.Namespace) -> int:
    from ..core.relevance import check_min_relevance
    from ..core.validate import StoreError, recall_params

    try:  # check the options before the model loads (the store's own check)
        recall_params(
            result_limit(args),
            weights_arg(args.weights),
            args.k,
            args.pool,
            args.pool_size,
            args.bm25_limit,
            args.profile,
            args.alpha,
            args.min_similarity,
            oversample=args.oversample,
        )
        check_min_relevance(args.min_relevance, "--min-relevance")
    except StoreError as e:
        raise CliError(str(e)) from None
    with open_db(args, model="recall") as store:
        return recall_and_print(store, args)
