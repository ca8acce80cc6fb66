"""Evaluation on BEIR-layout collections and LongMemEval files (``sqlite-rrf eval``), one
concern per module:

* :mod:`.beir` — reading a collection (corpus, queries, qrels, embedding caches);
* :mod:`.metrics` — nDCG@k, recall@k, MRR@k and their means over a split;
* :mod:`.cached_store` — the collection loaded into a Store, cached on disk;
* :mod:`.runs` — the named sets of recall parameters that are measured;
* :mod:`.workers` — the queries sent through ``Store.recall``, in worker processes or not;
* :mod:`.runner` — :func:`~sqlite_rrf.evaluation.runner.evaluate`, which ties them together;
* :mod:`.report` — the table and the plot;
* :mod:`.progress` — the progress bars;
* :mod:`sqlite_rrf.cli.evaluate` — the ``sqlite-rrf eval`` command (a front-end).
* :mod:`.longmemeval` — agent memory: one memory per question, its runs and table
  (``sqlite-rrf eval FILE.json[.xz]``); :mod:`.longmemeval_data` reads LongMemEval's JSON
  format and :mod:`.longmemeval_metrics` scores a question;
* :mod:`.embcache` — the on-disk cache of text embeddings it reads its vectors from.

Import each name from its module (``from sqlite_rrf.evaluation.runner import evaluate``);
importing this package imports none of its modules.
"""
