"""``sqlite_rrf.migrations``: the name docs/python.md gives; the module is
:mod:`sqlite_rrf.core.migrations`."""

from .core.migrations import (
    PROGRESS_EVERY_S as PROGRESS_EVERY_S,
    Migration as Migration,
    MigrationError as MigrationError,
    applied as applied,
    available as available,
    current_version as current_version,
    migrate as migrate,
)
