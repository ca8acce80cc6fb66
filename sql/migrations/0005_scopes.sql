-- 0005: scopes. An episode belongs to a scope: a project, a user, an agent — any
-- text; '' (the default) is the shared, unscoped memory. The recall statement
-- takes :scope (and :kind, :since, :until) and applies them to both lists.
ALTER TABLE episodes ADD COLUMN scope TEXT NOT NULL DEFAULT '' CHECK (typeof(scope) = 'text');

-- The 'recent' vector pool of one scope (the unscoped pool reads
-- idx_episodes_accessed_at).
CREATE INDEX idx_episodes_scope_accessed_at
  ON episodes(scope, accessed_at DESC) WHERE embedding IS NOT NULL;

-- The BM25 list's filters: does row R pass (scope, kind, created_at)? One seek in
-- this narrow index answers without reading the wide row (its text and vector).
CREATE INDEX idx_episodes_filters ON episodes(rowid, scope, kind, created_at);
