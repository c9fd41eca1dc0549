"""Refinery curation: the Spark jobs that turn Common Crawl WARCs into filtered documents.

Stages (each a small class with one core method that knows nothing of Spark) live in their own
modules; `curation.job` only maps WARC files through them. See DESIGN.md in the shared folder.
"""
