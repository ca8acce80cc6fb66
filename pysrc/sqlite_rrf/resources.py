"""``sqlite_rrf.resources``: the name docs/python.md gives; the module is
:mod:`sqlite_rrf.core.sql_files`."""

from .core.sql_files import (  # noqa: F401
    data_path,
    read_sql,
    replace_params,
    sql_dir,
    statement_params,
)
