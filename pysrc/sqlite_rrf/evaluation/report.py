"""The evaluation's results for people: a table (:func:`format_table`) and a bar chart of
nDCG@10 per run (:func:`plot`, with matplotlib), next to the published SciFact figures."""

from __future__ import annotations

import math
import os
from typing import Any, Dict, Mapping, Optional

from .beir import PathLike

__all__ = ["PUBLISHED_SCIFACT", "format_table", "plot"]

#: Published nDCG@10 on SciFact's test split (see ../shared/data/README.md): BM25 from the
#: BEIR paper, all-MiniLM-L6-v2 from MTEB, RRF (k 60) of the two and a convex combination
#: from the cognica-io/bayesian-bm25 README.
PUBLISHED_SCIFACT: Dict[str, float] = {
    "BM25 (BEIR)": 0.665,
    "all-MiniLM-L6-v2 (MTEB)": 0.6451,
    "RRF k=60 (bayesian-bm25)": 0.7143,
    "convex (bayesian-bm25)": 0.7337,
}
#: The published number each run compares with on SciFact (for the table).
_PUBLISHED_BY_RUN = {"bm25": 0.665, "vector": 0.6451, "rrf": 0.7143, "convex": 0.7337}


def format_table(results: Mapping[str, Any]) -> str:
    """A readable table of :func:`~sqlite_rrf.evaluation.runner.evaluate`'s results (run,
    nDCG@10, R@100, MRR@10, ms/query, and the published nDCG@10 on SciFact), followed by
    the notes."""
    scifact = results.get("collection") == "scifact"
    runs = results["runs"]
    timing = results.get("timings", {}).get("runs", {})
    w = max([len("run")] + [len(r) for r in runs])
    head = f"{'run':<{w}}  nDCG@10   R@100  MRR@10  ms/query"
    if scifact:
        head += "  published nDCG@10"
    lines = [
        f"{results.get('collection', '?')} ({results['split']} split): "
        f"{results['queries']:,} queries, {results['corpus']:,} documents",
        "",
        head,
        "-" * len(head),
    ]
    for name, m in runs.items():
        ms = timing.get(name, {}).get("ms_per_query_median")
        line = (
            f"{name:<{w}}  {m['ndcg@10']:7.4f}  {m['recall@100']:6.4f}  {m['mrr@10']:6.4f}"
            f"  {'' if ms is None else f'{ms:8.1f}'}"
        )
        if scifact and name in _PUBLISHED_BY_RUN:
            line += f"  {_PUBLISHED_BY_RUN[name]:.4f}"
        lines.append(line.rstrip())
    t = results.get("timings", {})
    if "total_seconds" in t:
        lines.append("")
        lines.append(
            f"wall time {t['total_seconds']:.1f} s (load {t['load_seconds']:.1f} s, "
            f"store {t['store_seconds']:.1f} s)"
        )
    notes = results.get("notes") or []
    if notes:
        lines.append("")
        lines.append("notes:")
        lines.extend(f"  - {n}" for n in notes)
    return "\n".join(lines)


def plot(
    results: Mapping[str, Any], path: PathLike, references: Optional[Mapping[str, float]] = None
) -> str:
    """Write a bar chart (PNG) of nDCG@10 per run to ``path`` and return the path.

    ``references`` are horizontal lines (label → nDCG@10); by default the published
    SciFact numbers (:data:`PUBLISHED_SCIFACT`) when the collection is SciFact. Needs
    matplotlib (the ``bench`` extra), imported here only.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise RuntimeError(
            f"--plot needs matplotlib: pip install 'sqlite-rrf[bench]' ({e})"
        ) from None
    if references is None:
        references = PUBLISHED_SCIFACT if results.get("collection") == "scifact" else {}
    names = list(results["runs"])
    values = [results["runs"][n]["ndcg@10"] for n in names]
    fig, ax = plt.subplots(
        figsize=(max(6.0, 1.1 * len(names) + 3) + (2.5 if references else 0), 4.5), dpi=120
    )
    bars = ax.bar(names, values, color="#4C72B0", zorder=2)
    for b, v in zip(bars, values):
        ax.annotate(
            f"{v:.4f}",
            (b.get_x() + b.get_width() / 2, v),
            ha="center",
            va="bottom",
            fontsize=8,
            xytext=(0, 2),
            textcoords="offset points",
        )
    styles = ["--", ":", "-.", (0, (5, 1))]
    colors = ["#C44E52", "#55A868", "#8172B2", "#CCB974"]
    for i, (label, y) in enumerate(references.items()):
        ax.axhline(
            y,
            linestyle=styles[i % len(styles)],
            color=colors[i % len(colors)],
            linewidth=1.2,
            label=f"{label} {y:.4f}",
            zorder=3,
        )
    allv = values + list(references.values())
    lo = max(0.0, math.floor((min(allv) - 0.08) * 20) / 20) if allv else 0.0
    hi = min(1.0, max(allv) + 0.04) if allv else 1.0
    ax.set_ylim(lo, hi)
    ax.set_ylabel(f"nDCG@10 (axis from {lo:.2f})" if lo > 0 else "nDCG@10")
    ax.set_title(
        f"sqlite-rrf on {results.get('collection', '?')} ({results['split']} split, "
        f"{results['queries']} queries)"
    )
    ax.grid(axis="y", alpha=0.3, zorder=0)
    if references:
        ax.legend(
            fontsize=8,
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
            title="published",
            title_fontsize=8,
            frameon=False,
        )
    plt.setp(ax.get_xticklabels(), rotation=20 if len(names) > 5 else 0)
    fig.tight_layout()
    out = os.fspath(path)
    parent = os.path.dirname(os.path.abspath(out))
    os.makedirs(parent, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
    return out
