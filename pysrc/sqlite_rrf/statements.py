"""``sqlite_rrf.statements``: the name docs/python.md gives; the module is
:mod:`sqlite_rrf.core.statements`."""

from .core.statements import (  # noqa: F401
    DEFAULTS,
    K_DEFAULTS,
    POOL_MODES,
    POOLS,
    PROFILES,
    main,
    params_cte,
    recall_defaults,
    recall_parameters,
    recall_statement,
)
