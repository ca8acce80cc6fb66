-- 0005: scopes. An episode belongs to a scope: a project, a user, an agent — any
-- text; '' (the default) is the shared, unscoped memory. The recall statement
-- takes :scope (and :kind, :since, :until) and applies them to both lists.
ALTER TABLE episodes ADD COLUMN scope TEXT NOT NULL DEFAULT '' CHECK (typeof(scope) = 'text');

-- The 'recent' vector pool of one scope (the unscoped pool reads
-- idx_episodes_accessed_at).
CREATE INDEX idx_episodes_scope_accessed_at
  ON episodes(scope, accessed_at DESC) WHERE embedding IS NOT NULL;

-- The BM25 list's filters: is row R in scope S (of kind K)? A seek in these small
-- indexes (their key ends with the rowid) answers without reading the wide row.
CREATE INDEX idx_episodes_scope ON episodes(scope);
CREATE INDEX idx_episodes_kind ON episodes(kind);
