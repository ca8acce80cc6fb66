"""``sqlite_rrf.statements``: the name docs/python.md gives; the module is
:mod:`sqlite_rrf.core.statements`."""

from .core.statements import (
    DEFAULTS as DEFAULTS,
    K_DEFAULTS as K_DEFAULTS,
    POOL_MODES as POOL_MODES,
    POOLS as POOLS,
    PROFILES as PROFILES,
    main as main,
    params_cte as params_cte,
    recall_defaults as recall_defaults,
    recall_parameters as recall_parameters,
    recall_statement as recall_statement,
)
