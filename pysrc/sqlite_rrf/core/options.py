"""The options of one recall, as one frozen value: :class:`RecallOptions`.

:meth:`Store.recall <sqlite_rrf.store.Store.recall>` takes one (or its fields as
keywords), and every front-end builds one from its own input: the command line
(``sqlite-rrf recall``), the prompt hook and the warm server's hook
(:mod:`sqlite_rrf.app.prompt_recall`), and MCP's ``recall``. A value is checked when it
is made, so a bad option is refused (a :class:`~sqlite_rrf.core.validate.StoreError`
naming the field) before anything runs, wherever it came from.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

from .validate import LISTS, MAX_COUNT, StoreError, Vector, blob

#: ``weights`` as a caller gives them: ``(bm25, vector, recency, access)``, or a dict
#: with some of those keys.
Weights = Union[Sequence[Optional[float]], Mapping[str, Optional[float]]]
#: ``scope`` as a caller gives it: None, one scope, or a list or tuple of up to two.
Scope = Union[str, Sequence[str], None]

#: How many scopes one recall statement covers at most (``:scope`` and ``:scope2``).
MAX_RECALL_SCOPES = 2
#: The largest ``oversample`` (the quantized pool's Hamming stage keeps ``pool_size`` times
#: ``oversample`` candidates for the exact rescoring).
MAX_OVERSAMPLE = 10_000


@dataclasses.dataclass(frozen=True)
class RecallOptions:
    """Everything a recall can be told besides its query. Made and checked once; change
    one with :meth:`replace`. A field left None takes the statement's default
    (:func:`sqlite_rrf.core.statements.recall_defaults`, written once in
    ``sql/recall/params.sql``); docs/python.md ("Recall") says more of each.

    - ``limit``: how many episodes (1 to ``MAX_COUNT``).
    - ``weights``: ``(bm25, vector, recency, access)``, 0 turns a list off; a dict with
      some of those keys is read into that tuple (None: the list's default).
    - ``k``: the RRF constant (a finite number >= 0).
    - ``pool``: the vector pool, one of ``POOL_MODES``.
    - ``pool_size``: the vector pool's size (0 to ``MAX_COUNT``).
    - ``bm25_limit``: the BM25 list's depth (0 to ``MAX_COUNT``).
    - ``oversample``: ``'quantized'``: ``pool_size`` times this many are rescored (1 to 10000).
    - ``profile``: the fusion, one of ``PROFILES``.
    - ``alpha``: the cosine's weight against BM25 in ``'hybrid'`` and ``'convex'`` (0 to 1).
    - ``min_similarity``: drop candidates without a BM25 hit whose cosine is below it (-1 to 1).
    - ``time_weight``: what an episode in the query's time window gains in ``'hybrid'`` (>= 0).
    - ``collapse``: near-duplicates fill one slot (the statement's ``:collapse``); False: not.
    - ``include_superseded``: also the facts another one replaced (``:include_superseded``).
    - ``min_relevance``: the policy's floor (0 to 1); None: no policy, the whole ranking.
    - ``min_share``: with a floor, the share of the best hit's relevance a hit must reach.
    - ``now``: the clock (ms since the epoch) for ages and time expressions; None: now.
    - ``scope``: only this scope (a str; ``''`` is the shared one), or either of two
      (a list or tuple, kept as a tuple); None: every scope.
    - ``kind``: only episodes of this kind.
    - ``since``, ``until``: only episodes with ``since <= created_at < until`` (ms).
    - ``qvec``: the query vector instead of the embedder's (kept as float32 bytes).
    - ``session``: the caller's session, the topic gate's memory (non-empty text).
    - ``touch``: mark the returned episodes accessed afterwards (default True).
    - ``force``: recall even when the topic gate would skip (default False).
    - ``topic_gate``: turn the topic gate on (default False).
    - ``time_expressions``: read a time the query names into a window (default True).
    """

    limit: Optional[int] = None
    weights: Optional[Weights] = None
    k: Optional[float] = None
    pool: Optional[str] = None
    pool_size: Optional[int] = None
    bm25_limit: Optional[int] = None
    oversample: Optional[int] = None
    profile: Optional[str] = None
    alpha: Optional[float] = None
    min_similarity: Optional[float] = None
    time_weight: Optional[float] = None
    collapse: Optional[bool] = None
    include_superseded: Optional[bool] = None
    min_relevance: Optional[float] = None
    min_share: Optional[float] = None
    now: Optional[int] = None
    scope: Scope = None
    kind: Optional[str] = None
    since: Optional[int] = None
    until: Optional[int] = None
    qvec: Optional[Vector] = None
    session: Optional[str] = None
    touch: bool = True
    force: bool = False
    topic_gate: bool = False
    time_expressions: bool = True

    def __post_init__(self) -> None:
        _check(self)

    def replace(self, **changes: Any) -> "RecallOptions":
        """A copy with ``changes`` (field names), checked as a new value is; an unknown
        name is a TypeError."""
        unknown = sorted(set(changes) - set(FIELDS))
        if unknown:
            raise TypeError(f"RecallOptions has no field {unknown[0]!r}")
        return dataclasses.replace(self, **changes)

    @classmethod
    def of(
        cls, options: Optional["RecallOptions"] = None, limit: Optional[int] = None, **fields: Any
    ) -> "RecallOptions":
        """``options`` (default: all defaults) with ``limit`` (when not None) and the
        keyword ``fields`` put in: how :meth:`Store.recall` reads its arguments. A
        keyword that names no field is a TypeError, as a wrong keyword argument is."""
        if options is not None and not isinstance(options, cls):
            raise TypeError(f"options must be RecallOptions, got {type(options).__name__}")
        unknown = sorted(set(fields) - set(FIELDS))
        if unknown:
            raise TypeError(f"recall() got an unexpected keyword argument {unknown[0]!r}")
        if limit is not None:
            fields["limit"] = limit
        if options is None:
            return cls(**fields)
        return dataclasses.replace(options, **fields) if fields else options

    def params(self) -> Dict[str, Any]:
        """The statement's bindings for these options (a recall's ``result.params``): None
        is the statement's default, but ``limit`` is given (the default filled in); one or
        two scopes are ``scope`` and ``scope2``; the weights are ``w_bm25`` .. ``w_access``,
        ``time_weight`` is ``w_time``; ``time_from``/``time_to`` are None (the recall sets
        the query's time window)."""
        limit = self.limit
        if limit is None:
            from .statements import recall_defaults

            limit = recall_defaults()["result_limit"]
        scope, scope2 = scope_params(self.scope)
        w = dict(zip(LISTS, self.weights or (None,) * len(LISTS)))
        return {
            "limit": limit,
            "k": self.k,
            "pool": self.pool,
            "pool_size": self.pool_size,
            "profile": self.profile,
            "alpha": self.alpha,
            "min_similarity": self.min_similarity,
            "now": self.now,
            "skip_vectors": None,
            "scope": scope,
            "scope2": scope2,
            "kind": self.kind,
            "since": self.since,
            "until": self.until,
            "bm25_limit": self.bm25_limit,
            "oversample": self.oversample,
            "w_bm25": w["bm25"],
            "w_vec": w["vector"],
            "w_recency": w["recency"],
            "w_access": w["access"],
            "w_time": self.time_weight,
            "time_from": None,
            "time_to": None,
        }


#: The fields' names, in order.
FIELDS: Tuple[str, ...] = tuple(f.name for f in dataclasses.fields(RecallOptions))


def scope_params(scope: Any) -> Tuple[Optional[str], Optional[str]]:
    """The statement's ``(:scope, :scope2)`` for a recall's ``scope``: None (every
    scope), a str (that scope), or a list or tuple of up to :data:`MAX_RECALL_SCOPES`
    distinct str (the episodes of any of them, in one ranking). Anything else is a
    :class:`StoreError` naming ``scope``."""
    if scope is None:
        return None, None
    if isinstance(scope, str):
        return scope, None
    if not isinstance(scope, (list, tuple)):
        raise StoreError(
            f"scope: must be text, a list or tuple of texts, or None (every "
            f"scope), got {type(scope).__name__}"
        )
    names: list = []
    for s in scope:
        if not isinstance(s, str):
            raise StoreError(f"scope: each scope must be text, got {type(s).__name__} {s!r}")
        if s not in names:
            names.append(s)
    if not names:
        raise StoreError("scope: an empty list names no scope (None recalls every scope)")
    if len(names) > MAX_RECALL_SCOPES:
        raise StoreError(
            f"scope: one recall covers at most {MAX_RECALL_SCOPES} scopes (a "
            f"project's and the shared one, ''), got {len(names)}"
        )
    return names[0], (names[1] if len(names) > 1 else None)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _weights(weights: Any) -> Tuple[Optional[float], ...]:
    """``weights`` as the tuple ``(bm25, vector, recency, access)`` (None: that list's
    default), checked."""
    if isinstance(weights, Mapping):
        unknown = set(weights) - set(LISTS)
        if unknown:
            raise StoreError(f"weights: unknown list(s) {sorted(unknown)}; the lists are {LISTS}")
        ws = [weights.get(name) for name in LISTS]
    else:
        ws = list(weights)
        if len(ws) != len(LISTS):
            raise StoreError(f"weights: need 4 values {LISTS}, got {len(ws)}")
    for name, weight in zip(LISTS, ws):
        if weight is not None and (
            not isinstance(weight, (int, float)) or not math.isfinite(weight) or weight < 0
        ):
            raise StoreError(f"weights: {name} must be a finite number >= 0, got {weight!r}")
    return tuple(ws)


def _check(o: RecallOptions) -> None:
    """Refuse a bad field of ``o`` with a :class:`StoreError` naming it; put ``scope``,
    ``weights`` and ``qvec`` in their one form (a tuple, a tuple, float32 bytes)."""
    from .gate import gate_key
    from .relevance import check_min_relevance
    from .statements import POOL_MODES, PROFILES

    put = object.__setattr__  # the value is frozen: its own check normalises it once
    if o.session is not None:
        gate_key(o.session)  # checks it
    if o.min_relevance is not None:
        put(o, "min_relevance", check_min_relevance(o.min_relevance))
    if o.min_share is not None:
        put(o, "min_share", check_min_relevance(o.min_share, "min_share"))
    tw = o.time_weight
    if tw is not None and (not _number(tw) or tw < 0):
        raise StoreError(f"time_weight: must be a finite number >= 0, got {tw!r}")
    limit = o.limit
    if limit is not None and (not _is_int(limit) or not 1 <= limit <= MAX_COUNT):
        raise StoreError(f"limit: must be an integer from 1 to {MAX_COUNT}, got {limit!r}")
    if o.profile is not None and o.profile not in PROFILES:
        raise StoreError(f"profile: must be one of {PROFILES}, got {o.profile!r}")
    alpha = o.alpha
    if alpha is not None and (not isinstance(alpha, (int, float)) or not 0 <= alpha <= 1):
        raise StoreError(f"alpha: must be a number in [0, 1], got {alpha!r}")
    ms = o.min_similarity
    if ms is not None and (not isinstance(ms, (int, float)) or not -1 <= ms <= 1):
        raise StoreError(f"min_similarity: must be a number in [-1, 1], got {ms!r}")
    if o.now is not None and (not _is_int(o.now) or abs(o.now) > 2**62):
        raise StoreError(f"now: must be an integer (ms since the epoch), got {o.now!r}")
    scope_params(o.scope)
    if isinstance(o.scope, list):
        put(o, "scope", tuple(o.scope))
    if o.kind is not None and not isinstance(o.kind, str):
        raise StoreError(f"kind: must be text, got {type(o.kind).__name__}")
    for name, v in (("since", o.since), ("until", o.until)):
        if v is not None and (not _is_int(v) or abs(v) > 2**62):
            raise StoreError(f"{name}: must be an integer (ms since the epoch), got {v!r}")
    if o.pool is not None and o.pool not in POOL_MODES:
        raise StoreError(f"pool: must be one of {POOL_MODES}, got {o.pool!r}")
    for name, v in (("pool_size", o.pool_size), ("bm25_limit", o.bm25_limit)):
        if v is not None and (not _is_int(v) or not 0 <= v <= MAX_COUNT):
            raise StoreError(f"{name}: must be an integer from 0 to {MAX_COUNT}, got {v!r}")
    ov = o.oversample
    if ov is not None and (not _is_int(ov) or not 1 <= ov <= MAX_OVERSAMPLE):
        raise StoreError(f"oversample: must be an integer from 1 to {MAX_OVERSAMPLE}, got {ov!r}")
    k = o.k
    if k is not None and (not isinstance(k, (int, float)) or not math.isfinite(k) or k < 0):
        raise StoreError(f"k: must be a finite number >= 0, got {k!r}")
    if o.weights is not None:
        put(o, "weights", _weights(o.weights))
    if o.qvec is not None:
        put(o, "qvec", blob(o.qvec, "qvec")[0])
