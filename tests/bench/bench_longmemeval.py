"""LongMemEval tables for docs/evaluation.md: every run, per question type, in both
definitions (LongMemEval's own, and the published session style), for one episode unit.

    python tests/bench/bench_longmemeval.py ../shared/data/longmemeval-s/longmemeval_s_dev.json.xz \
        --unit session --json out.json      # prints Markdown tables

or ``--from out.json`` to print the tables of a saved run. The vectors come from the
embedding cache of ``sqlite-rrf eval`` (the first run embeds, with a progress bar).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any, Dict, List, Mapping

TYPES = (
    "multi-session",
    "temporal-reasoning",
    "knowledge-update",
    "single-session-user",
    "single-session-preference",
    "single-session-assistant",
)
LME_COLS = (
    "session.recall_any@5",
    "session.recall_all@5",
    "session.recall_all@10",
    "session.ndcg@10",
)
TURN_COLS = ("turn.recall_any@5", "turn.recall_all@5", "turn.recall_all@10", "turn.ndcg@10")
PUB_COLS = (
    "published.recall_any@5",
    "published.recall_all@5",
    "published.recall_all@10",
    "published.ndcg@10",
)


def _f(v: Any) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3f}"


def tables(res: Mapping[str, Any]) -> str:
    """Markdown: the headline table, then one table per definition with a row per run and
    type."""
    runs: Dict[str, Any] = res["runs"]
    out: List[str] = [
        f"unit: {res.get('unit', 'turn')}; {res['questions']} questions, "
        f"{res['scored']} scored by LongMemEval's rules, {res['abstention']} "
        "abstention",
        "",
    ]
    out += [
        "| run | any@5 | all@5 | all@10 | NDCG@10 | published any@5 | published all@5 | "
        "published NDCG@10 | abstention: published any@5 |",
        "|" + " --- |" * 9,
    ]
    for n, r in runs.items():
        a, p, ab = r["lme"]["all"], r["published"]["all"], r.get("abstention") or {}
        out.append(
            f"| {n} | "
            + " | ".join(_f(a.get(c)) for c in LME_COLS)
            + " | "
            + " | ".join(_f(p.get(c)) for c in (PUB_COLS[0], PUB_COLS[1], PUB_COLS[3]))
            + f" | {_f(ab.get('published.recall_any@5'))} |"
        )
    defs = [("LongMemEval's definitions, session level", "lme", LME_COLS)]
    if res.get("unit", "turn") == "turn":
        defs.append(("LongMemEval's definitions, turn level", "lme", TURN_COLS))
    defs.append(
        ("published style (every question, gold = answer_session_ids)", "published", PUB_COLS)
    )
    for title, key, cols in defs:
        out += [
            "",
            f"{title}: recall_any@5 / recall_all@5 / recall_all@10 / NDCG@10",
            "",
            "| run | " + " | ".join(f"{t} (n)" for t in TYPES) + " |",
            "|" + " --- |" * (len(TYPES) + 1),
        ]
        for n, r in runs.items():
            cells = []
            for t in TYPES:
                g = r[key].get(t)
                cells.append(
                    "–" if not g else " / ".join(_f(g.get(c)) for c in cols) + f" ({g['n']})"
                )
            out.append(f"| {n} | " + " | ".join(cells) + " |")
    t = res.get("timings", {})
    out += [
        "",
        f"wall {t.get('total_seconds', 0):.0f} s, embedding "
        f"{t.get('embedding_seconds', 0):.0f} s ({t.get('embedded_texts', 0)} texts "
        "embedded)",
    ]
    return "\n".join(out)


def main(argv: Any = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("file", nargs="?")
    ap.add_argument("--unit", default="session", choices=("session", "turn"))
    ap.add_argument("--json", help="save the results here")
    ap.add_argument("--from", dest="saved", help="print the tables of saved results")
    ap.add_argument(
        "--notime",
        action="store_true",
        help="also the default with time_weight 0 (run default-notime)",
    )
    a = ap.parse_args(argv)
    if a.saved:
        with open(a.saved) as f:
            res = json.load(f)
    else:
        from sqlite_rrf.evaluation.longmemeval import evaluate_longmemeval

        extra = {"default-notime": {"time_weight": 0.0}} if a.notime else None
        res = evaluate_longmemeval(
            a.file, unit=a.unit, extra_runs=extra, progress=sys.stderr.isatty()
        )
        if a.json:
            with open(a.json, "w") as f:
                json.dump(res, f)
    print(tables(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
