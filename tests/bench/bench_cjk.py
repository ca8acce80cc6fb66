#!/usr/bin/env python3
"""Benchmark: keyword recall in every script, and what it costs English
(migration 0011, docs/languages.md).

Run by hand (not part of the test suite)::

    .venv/bin/python tests/bench/bench_cjk.py multilingual
    .venv/bin/python tests/bench/bench_cjk.py english [--n 100000] [--queries 20] [--repeat 5]
    .venv/bin/python tests/bench/bench_cjk.py migrate [--n 1000000]
    <a venv with faker> tests/bench/bench_cjk.py make-set   # regenerates the data set

multilingual
    Keyword recall with no model on ``tests/data/multilingual_recall.json``: for each
    script (Japanese, Chinese, Korean, Thai) 50 memories and 50 queries, each query with
    the one memory that holds it (a job, a company, a city, a person's name, a word of
    the memory's sentence, or two of those typed together as CJK users type, without a
    space). The set is made by ``make-set`` from Faker's locale data (PyPI ``faker``,
    MIT licence; ja_JP, zh_CN, ko_KR, th_TH): names, jobs, companies, places and its
    lorem word lists, put into sentences written here. Hit@1, hit@5 and MRR of the
    target in ``Store.recall(query, 10)`` (default profile, no embeddings, so the BM25
    list decides), after (migration 0011, fts5_query's bigrams) and before (FTS5 over
    the raw text with porter unicode61 and fts5_query's tokens without Q16: the runs of
    letters, which is what sqlite-rrf did before 0011).

english
    A database of N English episodes (bench_recall's SciFact-derived build, with
    embeddings) at schema 10, and a copy migrated to 11 (timed). Compared: the FTS5
    index's bytes (dbstat over episodes_fts_*), the file's bytes, and the median
    latency of Store's default statement (pool recent, the default profile) and of the
    BM25 list alone, over the first ``--queries`` SciFact test claims, interleaved, both
    databases read through the same extension build (the C change only touches text
    with CJK characters or characters past U+FFFF, which these queries lack).

migrate
    The migration's time at N episodes (default 1,000,000; content only, SciFact
    sentences, no embeddings: the migration reads only the text), with its progress.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import time
from typing import Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SET_PATH = os.path.join(ROOT, "tests", "data", "multilingual_recall.json")
OUT = os.path.join(HERE, "out", "cjk")
sys.path.insert(0, os.path.dirname(ROOT))  # for `tests.bench.bench_recall`
sys.path.insert(0, ROOT)


# ---------------------------------------------------------------- the data set

LOCALES = {"ja": "ja_JP", "zh": "zh_CN", "ko": "ko_KR", "th": "th_TH"}


def make_set(n: int = 50, seed: int = 22) -> dict:
    """Memories and queries per script from Faker's locale data (needs ``faker``)."""
    from faker import Faker

    out: dict = {
        "source": "Faker (PyPI faker, MIT licence): names, jobs, companies, places "
        "and lorem words of ja_JP, zh_CN, ko_KR, th_TH, in sentences "
        "written for this benchmark (tests/bench/bench_cjk.py make-set)",
        "scripts": {},
    }
    for lang, loc in LOCALES.items():
        f = Faker(loc)
        f.seed_instance(seed)
        mems: List[str] = []
        fields: List[Dict[str, str]] = []
        while len(mems) < n:
            name = f.name().replace(" ", "")
            job = f.job() if hasattr(f, "job") else f.word()
            company = f.company()
            city = f.city()
            if lang == "ja":
                word = f.word()
                text = (
                    f"{name}さんは{city}に住んでいて、{company}で{job}として働いている。"
                    f"{f.sentence()}最近は{word}に興味があるらしい。"
                )
            elif lang == "zh":
                word = f.word()
                text = f"{name}住在{city}，在{company}担任{job}。{f.sentence()}最近他对{word}很感兴趣。"
            elif lang == "ko":
                word = f.catch_phrase().split()[-1]
                text = (
                    f"{name}씨는 {city}에 살고 있으며 {company}에서 {job}(으)로 일하고 "
                    f"있습니다. 요즘은 {word}에 관심이 많다고 합니다."
                )
            else:
                word = f.word()
                text = (
                    f"{name}อาศัยอยู่ที่{city}และทำงานเป็น{job}ที่{company} "
                    f"{f.sentence()}ช่วงนี้สนใจเรื่อง{word}"
                )
            mems.append(text)
            fields.append(
                {
                    "name": name,
                    "job": job,
                    "city": city,
                    "word": word,
                    "company": re.sub(
                        r"^\(주\)\s*|株式会社|有限会社|有限公司|บริษัท\s*|จำกัด", "", company
                    ).strip(),
                }
            )
        queries = []
        kinds = ["job", "company", "city", "word", "name", "two"]
        for i, fl in enumerate(fields):
            for k in range(len(kinds)):
                kind = kinds[(i + k) % len(kinds)]
                if kind == "two":
                    a, b = fl["city"].split()[0], fl["job"].split()[0]
                    q = a + b  # typed together, without a space
                    target_ok = all((a in m and b in m) == (j == i) for j, m in enumerate(mems))
                else:
                    q = fl[kind]
                    target_ok = len(q) >= 2 and q in mems[i] and sum(q in m for m in mems) == 1
                if target_ok:
                    queries.append({"query": q, "kind": kind, "target": i})
                    break
        out["scripts"][lang] = {"memories": mems, "queries": queries[:n]}
    return out


# ---------------------------------------------------------------- multilingual recall


def _old_expression(text: str) -> str:
    """fts5_query before migration 0011 (Q2 without Q16): the runs of letters, quoted."""
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from test_cjk import is_token_char

    toks: List[str] = []
    for run in re.findall(r"[^\x00]+", "".join(c if is_token_char(c) else "\x00" for c in text)):
        if run.lower() not in [t.lower() for t in toks]:
            toks.append(run)
    return " OR ".join(f'"{t}"' for t in toks) or '""'


def multilingual() -> dict:
    import tempfile

    import apsw

    from sqlite_rrf.store import Store

    data = json.load(open(SET_PATH, encoding="utf-8"))
    table = {}
    for lang, d in data["scripts"].items():
        mems, queries = d["memories"], d["queries"]
        with tempfile.TemporaryDirectory() as tmp:
            ranks_new, ranks_old = [], []
            with Store(os.path.join(tmp, "m.db")) as s:
                ids = [s.add(m, id=f"m{i}") for i, m in enumerate(mems)]
                for q in queries:
                    hits = [h.id for h in s.recall(q["query"], 10, touch=False).hits]
                    t = ids[q["target"]]
                    ranks_new.append(hits.index(t) + 1 if t in hits else None)
            old = apsw.Connection(":memory:")
            old.execute("CREATE VIRTUAL TABLE f USING fts5(c, tokenize = 'porter unicode61')")
            old.executemany(
                "INSERT INTO f(rowid, c) VALUES (?, ?)", [(i, m) for i, m in enumerate(mems)]
            )
            for q in queries:
                rows = [
                    r
                    for (r,) in old.execute(
                        "SELECT rowid FROM f WHERE f MATCH ? ORDER BY bm25(f), rowid LIMIT 10",
                        (_old_expression(q["query"]),),
                    )
                ]
                ranks_old.append(rows.index(q["target"]) + 1 if q["target"] in rows else None)

        def summary(ranks):
            return {
                "hit@1": sum(r == 1 for r in ranks) / len(ranks),
                "hit@5": sum(r is not None and r <= 5 for r in ranks) / len(ranks),
                "mrr@10": sum(1 / r for r in ranks if r) / len(ranks),
            }

        table[lang] = {
            "memories": len(mems),
            "queries": len(queries),
            "before": summary(ranks_old),
            "after": summary(ranks_new),
        }
    return table


# ---------------------------------------------------------------- English: size and latency


def _before_migrations():
    from sqlite_rrf.core.migrations import available

    return [m for m in available() if m.version < 11]


def _progress(conn, label: str):
    """Print the elapsed time every ~2 s while a statement runs (apsw progress handler)."""
    t0 = time.perf_counter()
    last = [t0]

    def tick() -> bool:
        now = time.perf_counter()
        if now - last[0] >= 2:
            last[0] = now
            print(f"  {label}: {now - t0:.0f} s", file=sys.stderr, flush=True)
        return False

    conn.set_progress_handler(tick, 100_000)
    return t0


def migrate_timed(path: str) -> float:
    import apsw

    import sqlite_rrf
    from sqlite_rrf.core.migrations import migrate

    conn = apsw.Connection(path)
    sqlite_rrf.load(conn)
    conn.execute("PRAGMA cache_size = -262144")
    t0 = _progress(conn, "migration 0011")
    done = migrate(conn)
    dt = time.perf_counter() - t0
    conn.set_progress_handler(None)
    assert done == [11], done
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return dt


def fts_bytes(conn) -> Dict[str, int]:
    return dict(
        conn.execute(
            "SELECT name, sum(pgsize) FROM dbstat WHERE name LIKE 'episodes_fts%' GROUP BY name"
        )
    )


def english(n: int, queries: int, repeat: int) -> dict:
    import apsw
    from tests.bench import bench_recall as br

    import sqlite_rrf

    os.makedirs(OUT, exist_ok=True)
    before = os.path.join(OUT, f"english_{n}_v10.db")
    after = os.path.join(OUT, f"english_{n}_v11.db")
    if not os.path.exists(before):
        from sqlite_rrf.core.migrations import migrate

        br.migrate = lambda conn: migrate(conn, _before_migrations())  # schema 10
        br.build_db(before, n, 1)
    shutil.copyfile(before, after)
    mig_s = migrate_timed(after)
    conns = {}
    for name, path in (("before", before), ("after", after)):
        c = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READONLY)
        sqlite_rrf.load(c)
        conns[name] = c
    out: dict = {
        "n": n,
        "migration_s": mig_s,
        "file_bytes": {k: os.path.getsize(p) for k, p in (("before", before), ("after", after))},
        "fts_bytes": {k: fts_bytes(c) for k, c in conns.items()},
    }
    qs = br.load_queries(queries)
    full = br.store_sql("recent", None)
    bm25 = br.BM25_SQL
    times: Dict[str, List[float]] = {f"{m}:{k}": [] for m in ("recall", "bm25") for k in conns}
    for r in range(repeat + 1):
        for _, text, qvec in qs:
            for name, c in conns.items():
                t0 = time.perf_counter()
                a = br.method_a(c, full, text, qvec, profile=None)
                t1 = time.perf_counter()
                br.method_c(c, text, bm25)
                t2 = time.perf_counter()
                if r:
                    times[f"recall:{name}"].append((t1 - t0) * 1000)
                    times[f"bm25:{name}"].append((t2 - t1) * 1000)
            # the same answers from both databases (the English index is the same)
            ra = br.method_a(conns["before"], full, text, qvec, profile=None)
            assert [x[:2] for x in ra] == [x[:2] for x in a], text
    out["median_ms"] = {k: statistics.median(v) for k, v in times.items()}
    return out


def migrate_big(n: int) -> dict:
    import apsw
    from tests.bench import bench_recall as br

    import sqlite_rrf
    from sqlite_rrf.core.migrations import migrate

    os.makedirs(OUT, exist_ok=True)
    base = os.path.join(OUT, f"content_{n}_v10.db")
    if not os.path.exists(base):
        conn = apsw.Connection(base + ".building")
        conn.execute("PRAGMA journal_mode = DELETE")
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("PRAGMA cache_size = -262144")
        sqlite_rrf.load(conn)
        migrate(conn, _before_migrations())
        corpus = br.Corpus(br.SCIFACT)
        for lo in range(0, n, 50_000):
            rows = br.make_chunk(corpus, n, lo, min(n, lo + 50_000), 1)
            conn.execute("BEGIN")
            conn.executemany(
                "INSERT INTO episodes(id, content) VALUES (?, ?)", [(r[0], r[1]) for r in rows]
            )
            conn.execute("COMMIT")
            print(f"  build {n:,}: {lo + len(rows):,} rows", file=sys.stderr, flush=True)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.close()
        os.replace(base + ".building", base)
    path = os.path.join(OUT, f"content_{n}_v11.db")
    shutil.copyfile(base, path)
    return {"n": n, "migration_s": migrate_timed(path), "file_bytes": os.path.getsize(path)}


def main(argv: Optional[List[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=["multilingual", "english", "migrate", "make-set"])
    ap.add_argument("--n", type=int)
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args(argv)
    if a.what == "make-set":
        data = make_set()
        with open(SET_PATH, "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False, indent=1)
        print({k: (len(v["memories"]), len(v["queries"])) for k, v in data["scripts"].items()})
        return
    if a.what == "multilingual":
        res = multilingual()
        print("script  memories queries | before hit@1 hit@5 mrr | after hit@1 hit@5 mrr")
        for lang, r in res.items():
            b, f = r["before"], r["after"]
            print(
                f"{lang:6} {r['memories']:9} {r['queries']:7} | "
                f"{b['hit@1']:.2f} {b['hit@5']:.2f} {b['mrr@10']:.3f} | "
                f"{f['hit@1']:.2f} {f['hit@5']:.2f} {f['mrr@10']:.3f}"
            )
    elif a.what == "english":
        res = english(a.n or 100_000, a.queries, a.repeat)
    else:
        res = migrate_big(a.n or 1_000_000)
    print(json.dumps(res, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
