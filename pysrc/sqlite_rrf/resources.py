"""``sqlite_rrf.resources``: the name docs/python.md gives; the module is
:mod:`sqlite_rrf.core.sql_files`."""

from .core.sql_files import (
    data_path as data_path,
    read_sql as read_sql,
    replace_params as replace_params,
    sql_dir as sql_dir,
    statement_params as statement_params,
)
