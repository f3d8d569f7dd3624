"""The toolkit's vocabulary, below every layer: heads (``Head``), the ``LanguageModel`` protocol,
model names and result-file names (``naming``), results tables written atomically (``tables``),
one writer per table (``locking``), the row journals of unfinished runs (``journal``),
statistics (``stats``), what every result type shares (``results``: ``rows()``, ``to_pandas()``,
heads ranked by a score), and one-line reasons why a weights file was refused (``weights_files``).
Nothing here imports the rest of the package."""
