"""The toolkit's vocabulary, below every layer: heads (``Head``), the ``LanguageModel`` protocol,
model names and result-file names (``naming``), results tables written atomically (``tables``),
and statistics (``stats``). Nothing here imports the rest of the package."""
