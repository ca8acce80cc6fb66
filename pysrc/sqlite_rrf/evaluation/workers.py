"""Sending the queries of a run through ``Store.recall``, in this process or in a pool of
worker processes."""

from __future__ import annotations

import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ..store import Store
from .runs import DEPTH

__all__ = ["recall_queries", "start_workers"]

#: One query: (query id, text, its vector or None).
Query = Tuple[str, str, Optional[np.ndarray]]


def recall_queries(
    store: Union[Store, str], kwargs: Mapping[str, Any], queries: Sequence[Query], bar: Any = None
) -> List[Tuple[str, List[str], float]]:
    """(query id, ranked doc ids, seconds) for each query, through ``Store.recall``
    (``limit=DEPTH, touch=False, force=True``, the query's vector, ``kwargs``).
    ``store`` is a Store, or a database path (in a worker process) that is opened here."""
    own = not isinstance(store, Store)
    st = store if isinstance(store, Store) else Store(store)
    out: List[Tuple[str, List[str], float]] = []
    try:
        for qid, text, qvec in queries:
            t = time.perf_counter()
            res = st.recall(text, DEPTH, touch=False, force=True, qvec=qvec, **kwargs)
            out.append((qid, [h.id for h in res], time.perf_counter() - t))
            if bar is not None:
                bar.update(1)
    finally:
        if own:
            st.close()
    return out


def _noop() -> None:
    return None


def start_workers(jobs: int) -> Optional[ProcessPoolExecutor]:
    """A pool of ``jobs`` worker processes, all started now (None for one job).

    Forked where the platform can fork (so ``python -m sqlite_rrf`` works: a spawned
    child would re-run the command), which is why this runs before any database or
    model is opened; elsewhere spawned."""
    if jobs <= 1:
        return None
    import multiprocessing

    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context(method))
    try:
        # With fork, the first submit starts every worker.
        for f in [pool.submit(_noop) for _ in range(jobs)]:
            f.result()
    except BaseException:
        pool.shutdown(cancel_futures=True)
        raise
    return pool
