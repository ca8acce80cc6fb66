"""Text embeddings: which GGUF model to use and where its file comes from
(:mod:`.models`), and the embedder that turns text into vectors (:mod:`.embedder`)."""
