"""Recalling: the recall statement of one pool and profile, run in a read transaction,
its hits deduplicated and given their relevance; then the touch that marks them accessed.

A stored vector the statement cannot use (NaN, infinite, zero, the wrong size) is left
out of the vector list and named in the result's warnings (:meth:`Recall._pending_faults`,
:meth:`Recall._find_bad_vectors`).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Dict, List, Optional, Tuple

import apsw
import numpy as np

from ..core import knn
from ..core.gate import session_row
from ..core.options import RecallOptions
from ..core.results import RecallHit, RecallResult
from ..core.sqlite import patience, transaction
from ..core.statements import recall_defaults, recall_statement
from ..core.timeexpr import resolve as resolve_time
from ..core.validate import (
    blob,
    check_dim,
    has_text,
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
        options: Optional[RecallOptions] = None,
        **fields: Any,
    ) -> RecallResult:
        """The top ``limit`` episodes for ``query`` by the recall statement of the chosen
        pool and profile (:func:`sqlite_rrf.core.statements.recall_statement`): BM25,
        vector similarity, recency and access fused, near-duplicates folded, and with
        ``min_relevance`` the relevance policy; all in SQL, so every front-end agrees.

        ``options`` is a :class:`~sqlite_rrf.core.options.RecallOptions`; its fields may
        also be given as keywords (``pool="all"``, ``touch=False``), which override it. A
        field left None takes the statement's default (``sql/recall/params.sql``); a bad
        one is a :class:`StoreError` naming it, an unknown keyword a TypeError. The
        statement runs in a read transaction; the touch after it is best effort
        (``result.touched``, ``result.touch_error``). See docs/python.md ("Recall").
        """
        query = recall_query(query)
        opts = RecallOptions.of(options, limit, **fields)
        params = opts.params()
        now, session = opts.now, opts.session
        if opts.time_expressions:  # "last week", "in May": a window around now (timeexpr)
            window = resolve_time(query, now_ms() if now is None else now)
            if window is not None:
                params["time_from"], params["time_to"] = window.start, window.end
        qblob = None
        qarr = None
        if opts.qvec is not None:
            qblob, n = blob(opts.qvec, "qvec")
        elif self.embedder is not None and has_text(query):
            qblob, n = blob(self.embedder.embed(query), "query embedding")
        if qblob is not None:
            check_dim(n, self.dim, "qvec")
            qarr = np.frombuffer(qblob, "<f4").astype(np.float64)
            qarr /= np.linalg.norm(qarr)
            held = self._gate.holds(qarr, session, opts.force) if opts.topic_gate else None
            if held is not None:
                return RecallResult(
                    [], query, skipped=True, gate_cosine=held[0], params=params, reason=held[1]
                )
        knn.check_pool(self.conn, params, qblob)
        bindings = dict(
            params,
            query=query,
            qvec=qblob,
            collapse=None if opts.collapse is None else int(bool(opts.collapse)),
            min_relevance=opts.min_relevance,
            min_share=opts.min_share,
            include_superseded=(
                None if opts.include_superseded is None else int(bool(opts.include_superseded))
            ),
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
        if not hits and opts.min_relevance is not None:
            floor_reason = (
                f"nothing relevant enough: no hit reaches min_relevance {opts.min_relevance:g}"
            )
        if qarr is not None:
            self._gate.remember(qarr)
        touched, why = False, None
        args = None
        if hits or (session is not None and qarr is not None):
            args = ([h.rowid for h in hits], session, qarr)
            if opts.touch:
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
