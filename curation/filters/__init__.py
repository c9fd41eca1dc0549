"""Decisions to keep or drop a page: the URL filter (`url_filter`, with its domain lists in `urls`),
language ID with lid.176 (`langid`), and the heuristic text blocks (`blocks`, the registry entries;
`text`, our implementations of datatrove's rules; `words` and `words_kernels`, their shared pre-pass)."""
