"""``python -m sqlite_rrf`` runs the ``sqlite-rrf`` command line."""

from .cli import main

raise SystemExit(main())
