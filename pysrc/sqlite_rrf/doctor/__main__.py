"""``python -m sqlite_rrf.doctor [--write]``: print (or write) ``sql/schema_objects.sql``."""

from . import main

raise SystemExit(main())
