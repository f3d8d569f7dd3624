"""Task data: the ten synthetic tasks and their generators (``tasks``), the symbols they use
(``vocab``), and the paper's own JSONL files (``paper_files``)."""
