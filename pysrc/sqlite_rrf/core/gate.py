"""The topic gate: a recall is held back when its query says what the caller's previous
query said (their embeddings' cosine above :data:`TOPIC_GATE_COSINE`), unless forced.

The previous query belongs to the caller: a Store instance (in memory), or a session
(any text, e.g. an agent's session id), remembered in ``rrf_meta`` under
``topic_gate:<session>`` by touching recalls, so that it holds across processes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Tuple

if TYPE_CHECKING:  # light to import: the command line's help names the threshold
    import apsw
    import numpy as np

#: The topic gate: a recall is skipped when the query's embedding has a cosine
#: above this with the previous recalled query's (unless forced).
TOPIC_GATE_COSINE = 0.85


def gate_key(session: str) -> str:
    """The ``rrf_meta`` key of ``session``'s previous query; refuses a session that is
    not non-empty text."""
    if not isinstance(session, str) or not session:
        from .validate import StoreError

        raise StoreError(f"session: must be non-empty text, got {session!r}")
    return f"topic_gate:{session}"


def session_row(session: str, qarr: np.ndarray) -> Tuple[str, bytes]:
    """The ``rrf_meta`` row that remembers ``qarr`` as ``session``'s previous query."""
    return gate_key(session), qarr.astype("<f4").tobytes()


class TopicGate:
    """One Store's gate: its own previous query, and the sessions' in its database."""

    def __init__(self, conn: apsw.Connection) -> None:
        self.conn = conn
        self.last: Optional[np.ndarray] = None  # this instance's previous query (unit norm)

    def previous(self, session: Optional[str]) -> Optional[np.ndarray]:
        """The caller's previous query vector: this instance's, or the session's."""
        if session is None:
            return self.last
        import numpy as np

        from .sqlite import meta

        last = meta(self.conn, gate_key(session))
        if isinstance(last, bytes) and last and len(last) % 4 == 0:
            return np.frombuffer(last, "<f4").astype(np.float64)
        return None

    def holds(
        self, qarr: np.ndarray, session: Optional[str], force: bool
    ) -> Optional[Tuple[float, str]]:
        """``(cosine, reason)`` when the recall of ``qarr`` (unit norm) is held back,
        else None."""
        last = self.previous(session)
        if last is None or force or last.shape != qarr.shape:
            return None
        cos = float(last @ qarr)
        if not cos > TOPIC_GATE_COSINE:  # (a NaN never holds)
            return None
        return cos, (
            f"topic unchanged: cosine {cos:.3f} > {TOPIC_GATE_COSINE} with the "
            "previous query (force=True recalls anyway)"
        )

    def remember(self, qarr: np.ndarray) -> None:
        """``qarr`` was recalled: it is this instance's previous query now."""
        self.last = qarr
