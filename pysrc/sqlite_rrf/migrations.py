"""``sqlite_rrf.migrations``: the name docs/python.md gives; the module is
:mod:`sqlite_rrf.core.migrations`."""

from .core.migrations import (  # noqa: F401
    PROGRESS_EVERY_S,
    Migration,
    MigrationError,
    applied,
    available,
    current_version,
    migrate,
)
