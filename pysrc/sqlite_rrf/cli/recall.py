"""``sqlite-rrf recall``: the options checked before the model loads, the recall, and
each hit printed (with ``--explain``, each list's part of its score)."""

from __future__ import annotations

import argparse
import json
import sys

TYPE_CHECKING = False  # typing is not imported at run time: `sqlite-rrf hook` starts fast
if TYPE_CHECKING:
    from typing import Any, Dict, Optional

    from ..core.options import RecallOptions

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


def recall_scope_arg(args: argparse.Namespace) -> Any:
    """The store's ``scope=`` for ``recall``'s ``--scope`` (app.recall_scopes): by default
    the working directory's project (app.derive_scope) and the shared scope; every scope
    for a caller without the option (the demo)."""
    from ..app import derive_scope, recall_scopes

    if not hasattr(args, "scope"):
        return None
    return recall_scopes(args.scope, derive_scope() if args.scope is None else None, "--scope")


def recall_options(args: argparse.Namespace) -> RecallOptions:
    """The recall of ``sqlite-rrf recall``'s options (a caller without some of them, the
    demo, gets their defaults). A bad value is refused naming the option where the
    command line checks it (``--weights``, ``--since``, ``--until``, ``--scope``,
    ``--min-relevance``), else naming the field (:class:`RecallOptions`)."""
    from ..core.options import RecallOptions
    from ..core.relevance import check_min_relevance

    floor = check_min_relevance(getattr(args, "min_relevance", None), "--min-relevance")
    return RecallOptions(
        limit=args.limit,
        weights=weights_arg(args.weights),
        k=args.k,
        pool=args.pool,
        pool_size=args.pool_size,
        oversample=getattr(args, "oversample", None),
        bm25_limit=args.bm25_limit,
        touch=not args.no_touch,
        force=args.force,
        topic_gate=getattr(args, "topic_gate", False),
        collapse=False if getattr(args, "no_collapse", False) else None,
        session=getattr(args, "session", None),
        scope=recall_scope_arg(args),
        kind=getattr(args, "kind", None),
        since=parse_time(getattr(args, "since", None), "--since"),
        until=parse_time(getattr(args, "until", None), "--until"),
        profile=args.profile,
        alpha=args.alpha,
        min_similarity=args.min_similarity,
        min_relevance=floor,
        include_superseded=True if getattr(args, "include_superseded", False) else None,
    )


def recall_and_print(
    store: Any, args: argparse.Namespace, options: Optional[RecallOptions] = None
) -> int:
    """Recall with ``options`` (default: :func:`recall_options` of ``args``) and print the
    hits as ``args`` asks (``--json``, ``--explain``)."""
    from ..store import StoreError

    try:
        result = store.recall(args.query, options=options or recall_options(args))
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
    from ..core.validate import StoreError

    try:  # the options are checked before the model loads (the store's own check)
        options = recall_options(args)
    except StoreError as e:
        raise CliError(str(e)) from None
    with open_db(args, model="recall") as store:
        return recall_and_print(store, args, options)
