"""The core layer: the extension's loader and its compiled kernels, the SQL files and the
recall statement built from them, the schema's migrations, input validation, the results'
types, and small pure modules (time expressions, text keys, the fold's thresholds,
relevance, the topic gate, stopwords, the knn pool's index). Nothing here imports from
the store, the embedder, the application or a front-end (tests/test_layers.py)."""
