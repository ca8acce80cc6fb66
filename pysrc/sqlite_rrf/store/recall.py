"""Recalling: the recall statement of one pool and profile, run in a read transaction,
its hits deduplicated and given their relevance; then the touch that marks them accessed.

A stored vector the statement cannot use (NaN, infinite, zero, the wrong size) is left
out of the vector list and named in the result's warnings (:meth:`Recall._pending_faults`,
:meth:`Recall._find_bad_vectors`).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import apsw
import numpy as np

from ..core import knn
from ..core.gate import gate_key, session_row
from ..core.relevance import check_min_relevance
from ..core.results import RecallHit, RecallResult
from ..core.sqlite import patience, transaction
from ..core.statements import recall_defaults, recall_statement
from ..core.timeexpr import resolve as resolve_time
from ..core.validate import (
    Vector,
    blob,
    check_dim,
    has_text,
    recall_params,
    recall_query,
    vector_fault,
)
from .connection import Connection, now_ms


class Recall(Connection):
    """Recall and touch."""

    def recall(
        self,
        query: str,
        limit: Optional[int] = None,
        *,
        weights: Optional[Union[Sequence[float], Mapping[str, float]]] = None,
        k: Optional[float] = None,
        pool: Optional[str] = None,
        pool_size: Optional[int] = None,
        bm25_limit: Optional[int] = None,
        touch: bool = True,
        force: bool = False,
        qvec: Optional[Vector] = None,
        profile: Optional[str] = None,
        alpha: Optional[float] = None,
        min_similarity: Optional[float] = None,
        now: Optional[int] = None,
        session: Optional[str] = None,
        scope: Union[str, Sequence[str], None] = None,
        kind: Optional[str] = None,
        since: Optional[int] = None,
        until: Optional[int] = None,
        oversample: Optional[int] = None,
        topic_gate: bool = False,
        collapse: bool = True,
        min_relevance: Optional[float] = None,
        time_expressions: bool = True,
        time_weight: Optional[float] = None,
        min_share: Optional[float] = None,
        include_superseded: bool = False,
    ) -> RecallResult:
        """The top ``limit`` episodes for ``query`` by the recall statement of the
        chosen pool and profile (:func:`sqlite_rrf.core.statements.recall_statement`): BM25,
        vector similarity, recency and access fused.

        Every option left as None takes the statement's own default
        (:func:`sqlite_rrf.core.statements.recall_defaults`, written once in
        ``sql/recall/params.sql``). ``weights`` is ``(bm25, vector, recency, access)`` or
        a dict with those keys (0 turns a list off); ``k`` is the RRF constant; ``pool``
        is one of :data:`POOL_MODES` (``'recent'``: the most recently accessed episodes;
        ``'all'``: the ``pool_size`` nearest of all episodes, exactly; ``'quantized'``:
        the same through 1-bit codes, ``oversample`` times as many candidates rescored
        exactly; ``'knn'``: sqlite-vec's); ``bm25_limit`` is the BM25 list's depth.
        ``profile`` chooses the fusion (:data:`PROFILES`; the default ``'hybrid'`` adds
        the cosine and the BM25 score, each relative to the query's best, with recency,
        use and importance as bounded nudges; ``'rrf'`` is the four-list RRF of
        docs/contract.md);
        ``alpha`` weighs cosine against BM25 in ``'hybrid'`` and ``'convex'``; ``min_similarity``
        drops candidates with no BM25 hit whose similarity is below it; ``now`` (ms)
        fixes the clock for ages and for the query's time expressions: with
        ``time_expressions`` (the default) a time the query names ("yesterday", "last
        week", "in May", "two months ago": :mod:`sqlite_rrf.core.timeexpr`, resolved against
        ``now``) is a window, and in profile ``'hybrid'`` the episodes created in it gain
        ``time_weight`` of relevance (default in ``params.sql``; 0 turns it off); it is a
        signal, never a filter. ``qvec`` gives the query vector instead of the
        embedder's. ``scope``, ``kind``, ``since`` and ``until`` (ms, on ``created_at``;
        ``since`` inclusive, ``until`` exclusive) keep only the episodes that match, in
        both lists: the BM25 list is the best of the matching rows, the vector pool the
        best or most recent of them. ``scope`` is None (every scope), a str (that scope;
        ``''`` is the shared scope), or a list or tuple of two (any of them, in one
        ranking: ``("shop", "")`` is the project and the shared scope; the statement's
        ``:scope`` and ``:scope2``).

        The statement runs in a read transaction, which never blocks a writer. Then
        ``touch`` marks the returned episodes accessed (``accessed_at = now``,
        ``access_count + 1``) in a short write transaction of its own, waiting at most
        :attr:`TOUCH_PATIENCE` (50 ms) for another process's write lock; a touch that
        cannot be made (the lock busy, a read-only database, a full disk, an I/O error)
        never fails the recall: ``result.touched`` is False and ``result.touch_error`` says
        why. With ``touch=False`` nothing is written; :meth:`touch` makes the touch later.

        Everything that decides which episodes come back, and in what order, is the
        statement's (the same rows in the sqlite3 shell, Datasette and every front-end):

        - the fold (``collapse``, the default): near-duplicates, the same text or an
          embedding cosine of at least :data:`sqlite_rrf.core.fold.COLLAPSE_COSINE` with
          the same terms, fill one slot, the newest of them, whose ``duplicates`` says
          how many others it stands for and ``duplicate_ids`` names them; the freed
          slots are filled from further down. A fact that another replaced
          (``superseded_by``) is left out unless ``include_superseded``.
        - the order: ``score`` is the final score (the slot's best fused score; the
          row's own is ``fused_score``); the hits come in its order.
        - ``relevance``, in [0, 1] and absolute: the same number means the same for
          every query (:func:`sqlite_rrf.core.relevance.relevance`, from the hit's cosine and
          its BM25 score as a share of the query's IDF mass).
        - the policy, with ``min_relevance`` (a floor in [0, 1]): a hit is returned only
          when its relevance reaches the floor and is at least ``min_share`` (default in
          ``params.sql``) of the best hit's; when none is, the result is empty and
          ``result.reason`` says so. Its default here is None, no policy: a library
          caller gets the whole ranking with the relevance to judge it by; the prompt
          hook and the MCP ``recall`` use :data:`sqlite_rrf.core.relevance.DEFAULT_MIN_RELEVANCE`.

        A touch marks only the hits returned (after the policy).

        The topic gate is off unless ``topic_gate=True``: then it skips the recall
        (``result.skipped``) when the query's embedding has a cosine above
        :data:`~sqlite_rrf.core.gate.TOPIC_GATE_COSINE` with the caller's
        previous query, unless ``force``. The previous query belongs to the caller: this
        Store instance, or, with ``session`` (any text, e.g. an agent's session id), that
        session, remembered in the database by touching recalls so that it holds across
        processes. Two agents sharing a memory never gate each other. The gate is off by
        default because a cosine that high does not mean the same question: a follow-up
        about another painting of the same artist can have 0.96.
        """
        query = recall_query(query)
        if session is not None:
            gate_key(session)  # checks it
        min_relevance = check_min_relevance(min_relevance)
        min_share = check_min_relevance(min_share, "min_share")
        params = self._recall_params(
            limit,
            weights,
            k,
            pool,
            pool_size,
            bm25_limit,
            profile,
            alpha,
            min_similarity,
            now,
            scope=scope,
            kind=kind,
            since=since,
            until=until,
            oversample=oversample,
            time_weight=time_weight,
        )
        if time_expressions:  # "last week", "in May": a window around now (timeexpr)
            window = resolve_time(query, now_ms() if now is None else now)
            if window is not None:
                params["time_from"], params["time_to"] = window.start, window.end
        qblob = None
        qarr = None
        if qvec is not None:
            qblob, n = blob(qvec, "qvec")
        elif self.embedder is not None and has_text(query):
            qblob, n = blob(self.embedder.embed(query), "query embedding")
        if qblob is not None:
            check_dim(n, self.dim, "qvec")
            qarr = np.frombuffer(qblob, "<f4").astype(np.float64)
            qarr /= np.linalg.norm(qarr)
            held = self._gate.holds(qarr, session, force) if topic_gate else None
            if held is not None:
                return RecallResult(
                    [], query, skipped=True, gate_cosine=held[0], params=params, reason=held[1]
                )
        knn.check_pool(self.conn, params, qblob)
        bindings = dict(
            params,
            query=query,
            qvec=qblob,
            collapse=int(bool(collapse)),
            min_relevance=min_relevance,
            min_share=min_share,
            include_superseded=int(bool(include_superseded)),
        )
        hits: List[RecallHit] = []
        warnings: List[str] = list(self.schema_warnings)
        # the unusable vectors keep pending codes: a seek finds them, on every recall
        pending_bad = self._pending_faults(warnings) if qblob is not None else {}
        for attempt in range(2):
            bad = {**self._bad_vectors, **pending_bad}
            bindings["skip_vectors"] = json.dumps(sorted(bad)) if bad else None
            try:
                hits = self._run_recall(params, bindings)
                break
            except apsw.SQLError as e:
                # a stored vector the statement cannot use (e.g. NaN written by a client
                # without the extension): find such rows, leave them out, say which
                if qblob is None or attempt or "vec_cosine:" not in str(e):
                    raise
                found = self._find_bad_vectors()
                if not found:
                    raise
                self._bad_vectors.update(found)
        for rowid, fault in sorted({**self._bad_vectors, **pending_bad}.items()):
            warnings.append(
                f"episode rowid {rowid} has an embedding that cannot be used "
                f"({fault}): it is left out of the vector list; rewrite its embedding "
                "(or set it to NULL and run `sqlite-rrf embed`)"
            )
        floor_reason = None
        if not hits and min_relevance is not None:
            floor_reason = (
                f"nothing relevant enough: no hit reaches min_relevance {min_relevance:g}"
            )
        if qarr is not None:
            self._gate.remember(qarr)
        touched, why = False, None
        args = None
        if hits or (session is not None and qarr is not None):
            args = ([h.rowid for h in hits], session, qarr)
            if touch:
                touched, why = self._touch(*args)
                args = None
        return RecallResult(
            hits,
            query,
            params=params,
            touched=touched,
            touch_error=why,
            warnings=warnings,
            _touch_args=args,
            reason=floor_reason,
        )

    def _run_recall(self, params: Dict[str, Any], bindings: Dict[str, Any]) -> List[RecallHit]:
        """The statement in one read transaction (one snapshot, no write lock)."""
        hits: List[RecallHit] = []
        with transaction(self.conn, write=False):
            defaults = recall_defaults()
            sql = recall_statement(
                params["pool"] or defaults["pool"], params["profile"] or defaults["profile"]
            )
            for row in self.conn.execute(sql, bindings):
                # RecallHit's fields, in order; explain and duplicate_ids are JSON text
                fields: List[Any] = list(row)
                fields[9] = json.loads(fields[9]) if fields[9] else {}
                fields[17] = tuple(json.loads(fields[17])) if fields[17] else ()
                hits.append(RecallHit(*fields))
        return hits

    #: Pending codes whose vectors a recall checks (:meth:`_pending_faults`).
    PENDING_CHECK = 10_000

    def _pending_faults(self, warnings: List[str]) -> Dict[int, str]:
        """``{rowid: fault}`` of the vectors with a pending code that the recall cannot use
        (zero, NaN, infinite, wrong size: :func:`sqlite_rrf.core.validate.vector_fault`). A vector
        that cannot be used never gets a code (:meth:`compute_codes`, migration 0009), so
        these are all of them, found by a seek of the pending codes. Beyond
        :attr:`PENDING_CHECK` pending codes the rest are not read, and ``warnings`` says
        so."""
        # the answer holds until a commit: this connection's (total_changes) or another's
        # (data_version), so a recall after no write reads nothing here
        key = (self.conn.execute("PRAGMA data_version").fetchone()[0], self.conn.total_changes())
        seen = self._pending_seen
        if seen is not None and seen[0] == key:
            warnings.extend(seen[2])
            return dict(seen[1])
        before = len(warnings)
        rows = self.conn.execute(
            "SELECT c.rowid, v.embedding FROM episodes_codes AS c "
            "INDEXED BY idx_episodes_codes_pending JOIN episodes_vectors AS v ON v.rowid = c.rowid "
            "WHERE c.code IS NULL ORDER BY c.rowid LIMIT ?",
            (self.PENDING_CHECK + 1,),
        ).fetchall()
        if len(rows) > self.PENDING_CHECK:
            rows = rows[: self.PENDING_CHECK]
            warnings.append(
                f"more than {self.PENDING_CHECK} sign codes are pending (vectors written by "
                "another client): only the first were checked for vectors the recall cannot "
                "use; open the database with a writable Store, or run `sqlite-rrf check DB "
                "--repair`, to compute them"
            )
        dim = self.dim
        found: Dict[int, str] = {}
        for rowid, emb in rows:
            fault = vector_fault(emb, dim)
            if fault is not None:
                found[rowid] = fault
        self._pending_seen = (key, dict(found), warnings[before:])
        return found

    def _find_bad_vectors(self, chunk: int = 4096) -> Dict[int, str]:
        """``{rowid: fault}`` of every stored embedding the recall cannot use: NaN or
        infinite values, zero norm, or a size other than the database's dimension. Runs
        only after a recall met one (it reads every embedding)."""
        bad: Dict[int, str] = {}
        dim = self.dim
        after = -(2**63)
        while True:
            rows = self.conn.execute(
                "SELECT rowid, embedding FROM episodes WHERE embedding IS NOT NULL AND rowid > ? "
                "ORDER BY rowid LIMIT ?",
                (after, chunk),
            ).fetchall()
            if not rows:
                return bad
            after = rows[-1][0]
            for rowid, emb in rows:
                fault = vector_fault(emb, dim)
                if fault is not None:
                    bad[rowid] = fault

    #: How long a touch waits for the write lock before it gives up (seconds): a touch is
    #: best effort, and a recall never waits longer than this for another process's write.
    TOUCH_PATIENCE = 0.05

    def touch(self, result: RecallResult) -> RecallResult:
        """Mark the hits of ``result``, a recall made with ``touch=False``, accessed (and
        remember its session's query for the topic gate), as ``recall(touch=True)`` would
        have; returns the result with ``touched`` and ``touch_error`` set. For a caller that
        shows the hits first and touches after (the hook prints before it touches). Best
        effort, like every touch: it waits at most :attr:`TOUCH_PATIENCE` for the write lock,
        and a failure is reported in the returned result, never raised."""
        args = result._touch_args
        if args is None or result.touched:
            return result
        touched, why = self._touch(*args)
        return dataclasses.replace(result, touched=touched, touch_error=why, _touch_args=None)

    def _touch(
        self, rowids: List[int], session: Optional[str], qarr: Optional[np.ndarray]
    ) -> Tuple[bool, Optional[str]]:
        """Mark ``rowids`` accessed (and remember the session's query) in one short write
        transaction, waiting at most :attr:`TOUCH_PATIENCE` for the write lock. Returns
        (done, why not): any failure (the lock busy, a full disk, read-only media, an I/O
        error) leaves the recall as it is."""
        not_done = "so the recalled episodes were not touched"
        if self.readonly and self.opened_as:
            return False, f"the recalled episodes were not touched: {self.opened_as}"
        if self.readonly:
            return False, f"the database is read-only, {not_done}"
        now = now_ms()
        wait_ms = max(0, int(self.TOUCH_PATIENCE * 1000))
        try:
            with patience(self.conn, wait_ms, self._busy_timeout_ms):
                with transaction(self.conn):
                    self.conn.executemany(
                        "UPDATE episodes SET accessed_at = ?, access_count = access_count + 1 "
                        "WHERE rowid = ?",
                        [(now, r) for r in rowids],
                    )
                    if session is not None and qarr is not None:
                        self.conn.execute(
                            "INSERT OR REPLACE INTO rrf_meta VALUES (?, ?)",
                            session_row(session, qarr),
                        )
            return True, None
        except (apsw.BusyError, apsw.LockedError):
            return False, (f"another process held the write lock (waited {wait_ms} ms), {not_done}")
        except apsw.FullError:
            return False, f"the disk is full, {not_done}"
        except apsw.ReadOnlyError as e:
            return False, f"the database is read-only ({e}), {not_done}"
        except apsw.Error as e:
            return False, f"the touch could not be written ({e}), {not_done}"

    #: Validate recall options; returns the statement's bindings (None = default):
    #: :func:`sqlite_rrf.core.validate.recall_params` (the CLI checks its options with it).
    _recall_params = staticmethod(recall_params)
