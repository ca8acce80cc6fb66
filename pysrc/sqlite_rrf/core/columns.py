"""The columns of an episode's record, in order: what the store's record reads return
(:mod:`sqlite_rrf.store.records`) and every field of an exported line, which ``sqlite-rrf
import`` reads (:mod:`sqlite_rrf.app.manage`)."""

RECORD_COLUMNS = (
    "id",
    "content",
    "scope",
    "kind",
    "importance",
    "metadata",
    "created_at",
    "accessed_at",
    "access_count",
    "embedding",
    "superseded_by",
    "confirmed_at",
)
