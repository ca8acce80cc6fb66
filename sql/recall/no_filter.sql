-- Whether every filter of filter.sql is off, written once: a fragment says {no_filter}
-- where a branch runs only without a filter (an index or a scan that cannot filter),
-- and NOT ({no_filter}) where one runs only with a filter.
:scope IS NULL AND :scope2 IS NULL AND :kind IS NULL AND :since IS NULL AND :until IS NULL
