"""``sqlite-rrf recall``: the options checked before the model loads, the recall, and
each hit printed (with ``--explain``, each list's part of its score)."""

from __future__ import annotations

import argparse
import json
import sys

TYPE_CHECKING = False  # typing is not imported at run time: `sqlite-rrf hook` starts fast
if TYPE_CHECKING:
    from typing import Any, Optional

from ..app import note, parse_time
from .common import CliError, open_db, weights_arg


def format_hit(i: int, h: Any, explain: bool, width: int = 100) -> str:
    def rank(name: str, r: Optional[int], extra: str = "") -> str:
        return f"{name} #{r}{extra}" if r is not None else f"{name} -"

    sim = f" (cos {h.similarity:.3f})" if h.similarity is not None else ""
    rel = f"  relevance {h.relevance:.3f}" if h.relevance is not None else ""
    head = (
        f"{i}. {h.id}  score {h.score:.5f}{rel}"
        + ("  [high importance]" if h.importance == "high" else "")
        + (
            f"  [stands for {h.duplicates} near-duplicate{'s' if h.duplicates != 1 else ''}]"
            if h.duplicates
            else ""
        )
    )
    ranks = "   " + " · ".join(
        [
            rank("bm25", h.bm25_rank),
            rank("vector", h.vec_rank, sim),
            rank("recency", h.recency_rank),
            rank("access", h.access_rank),
        ]
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
    if explain and "relevance" in (h.explain or {}):  # 'hybrid'
        r = h.explain["relevance"]
        a = r["alpha"]
        # the profile's blend of the cosine and the BM25 score, each relative to the
        # query's best (docs/profiles.md), not the hit's absolute relevance of the head line
        blend = a * r["cosine"] + (1 - a) * r["bm25"]
        g = h.explain.get("recency_access_importance", {}).get("nudge", 0.0)
        lines.append(
            f"   explain: blend {a:g}·cos/best {r['cosine']:.4f} + {1 - a:g}·bm25/best "
            f"{r['bm25']:.4f} = {blend:.5f}; + (1 − {blend:.5f}) × nudge {g:.4f} "
            f"(recency/use/importance) = {h.score:.5f}"
        )
    elif explain:
        parts = []
        mult = ""
        for name, e in h.explain.items():
            if not isinstance(e, dict):
                parts.append(f"{name} {e:.4g}" if isinstance(e, float) else f"{name} {e}")
            elif "multiplier" in e:
                mult = f" × {e['multiplier']:.5f} ({name.replace('_', '/')})"
            elif "rank" in e:
                parts.append(f"{name} {e['contribution']:.5f} = {e['weight']:g}/(k+{e['rank']:g})")
            elif "boost" in e:
                parts.append(f"{name} {e['boost']:.5f} = boost")
        body = " + ".join(parts)
        lines.append(
            f"   explain: ({body}){mult} = {h.score:.5f}"
            if mult
            else f"   explain: {body} = {h.score:.5f}"
        )
    return "\n".join(lines)


def result_limit(args: argparse.Namespace) -> int:
    """--limit, or the statement's default."""
    from ..statements import recall_defaults

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
        )
        print(
            json.dumps(
                [{k: getattr(h, k) for k in keys} for h in result], indent=2, ensure_ascii=False
            )
        )
        return 0
    if not result.skipped and not result.hits:
        print(result.reason or "no episodes matched")
    for i, h in enumerate(result, 1):
        print(format_hit(i, h, args.explain))
    return 0


def cmd_recall(args: argparse.Namespace) -> int:
    from ..checks import StoreError, recall_params
    from ..relevance import check_min_relevance

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
