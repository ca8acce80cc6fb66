-- 0005: scopes. An episode belongs to a scope: a project, a user, an agent — any
-- text; '' (the default) is the shared, unscoped memory. The recall statement
-- takes :scope (and :kind, :since, :until) and applies them to both lists.
ALTER TABLE episodes ADD COLUMN scope TEXT NOT NULL DEFAULT '' CHECK (typeof(scope) = 'text');

-- The 'recent' vector pool of one scope (the unscoped pool reads
-- idx_episodes_accessed_at), and a scope's episodes by creation time (:since/:until).
CREATE INDEX idx_episodes_scope_accessed_at
  ON episodes(scope, accessed_at DESC) WHERE embedding IS NOT NULL;
CREATE INDEX idx_episodes_scope_created_at ON episodes(scope, created_at);
