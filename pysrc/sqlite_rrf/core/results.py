"""What the store returns: an :class:`Episode` (one stored memory), a :class:`RecallHit`
(one recalled episode and why it ranked where it did) and a :class:`RecallResult` (the
hits of one recall, or why the recall was held back)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union, overload

import numpy as np


@dataclass(frozen=True)
class Episode:
    """One stored memory."""

    id: str
    content: str
    embedding: Optional[np.ndarray]
    created_at: int
    accessed_at: int
    access_count: int
    importance: str
    kind: Optional[str]
    metadata: Optional[Any]
    rowid: int
    scope: str = ""

    def as_dict(self) -> Dict[str, Any]:
        """The episode as a plain dict (the embedding as a list of floats, or None)."""
        d = {f: getattr(self, f) for f in self.__dataclass_fields__}
        d["embedding"] = None if self.embedding is None else [float(x) for x in self.embedding]
        return d


@dataclass(frozen=True)
class RecallHit:
    """One recalled episode with why it ranked where it did.

    ``*_rank`` is the episode's rank in that list (1 = best; None = absent from the
    list), ``similarity`` its cosine with the query, ``bm25_score`` FTS5's bm25
    (lower is better), ``explain`` the per-list contributions (``rrf_explain``).

    ``duplicates`` is how many other episodes of the recall this hit stands for: its
    near-duplicates, folded into it by the statement (it is the newest of them), whose
    ids are ``duplicate_ids`` (:mod:`sqlite_rrf.core.fold`).
    """

    id: str
    content: str
    score: float
    bm25_rank: Optional[int]
    vec_rank: Optional[int]
    recency_rank: Optional[int]
    access_rank: Optional[int]
    similarity: Optional[float]
    bm25_score: Optional[float]
    explain: Dict[str, Any]
    importance: str
    created_at: int
    accessed_at: int
    access_count: int
    rowid: int
    #: How likely the hit is to be about the query, in [0, 1], on one scale for every
    #: query (:mod:`sqlite_rrf.core.relevance`); None when it was not computed.
    relevance: Optional[float] = None
    duplicates: int = 0
    duplicate_ids: Tuple[str, ...] = ()
    #: The hit's own fused score; ``score`` is its slot's (the best fused score of the
    #: near-duplicates folded into it), which orders the hits.
    fused_score: Optional[float] = None

    def as_dict(self) -> Dict[str, Any]:
        """The hit as a plain dict (what ``sqlite-rrf recall --json`` prints)."""
        d = {f: getattr(self, f) for f in self.__dataclass_fields__}
        d["duplicate_ids"] = list(self.duplicate_ids)
        return d


@dataclass(frozen=True)
class RecallResult(Sequence[RecallHit]):
    """The hits of one recall (a sequence), or an empty result with ``skipped=True``
    and the ``reason`` when the topic gate held the recall back, or with ``skipped=False``
    and the ``reason`` when no hit reached ``min_relevance``. ``touched`` says whether
    the hits were marked accessed, and ``touch_error`` why not when a touch was asked for
    and could not be made."""

    hits: List[RecallHit]
    query: str
    skipped: bool = False
    reason: Optional[str] = None
    gate_cosine: Optional[float] = None
    params: Dict[str, Any] = field(default_factory=dict)
    touched: bool = False
    touch_error: Optional[str] = None
    warnings: List[str] = field(default_factory=list)
    #: what :meth:`sqlite_rrf.store.Store.touch` marks: (rowids, session, query vector)
    _touch_args: Optional[Tuple[Any, ...]] = field(default=None, repr=False, compare=False)

    @overload
    def __getitem__(self, i: int) -> RecallHit: ...
    @overload
    def __getitem__(self, i: slice) -> List[RecallHit]: ...
    def __getitem__(self, i: Union[int, slice]) -> Union[RecallHit, List[RecallHit]]:
        return self.hits[i]

    def __len__(self) -> int:
        return len(self.hits)

    def __iter__(self) -> Iterator[RecallHit]:
        return iter(self.hits)


class Written(List[str]):
    """What :meth:`sqlite_rrf.store.Store.add_many` returns: the episodes' ids, one per
    episode given, in order (a list of str), and which of them repeated a text.

    ``duplicates`` lists the positions of the episodes that named no id and whose text
    their scope already had (an episode, or an earlier one of the batch): no copy was
    stored; the episode that has the text was refreshed and its id is at that position.
    ``repeats`` lists the positions of episodes that named an id of their own and
    repeated a text of their scope: they were stored all the same.
    """

    def __init__(
        self, ids: Sequence[str], duplicates: Sequence[int] = (), repeats: Sequence[int] = ()
    ) -> None:
        super().__init__(ids)
        self.duplicates: Tuple[int, ...] = tuple(duplicates)
        self.repeats: Tuple[int, ...] = tuple(repeats)
