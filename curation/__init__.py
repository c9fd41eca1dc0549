"""Refinery curation: the Spark job that turns Common Crawl WARCs into filtered documents.

Stages (each a document stage with one `process` method that knows nothing of Spark, core/stage.py)
live in their own modules; `curation.pipeline` runs one file through them and `curation.job` maps
WARC files through the per-file runner. Importing the package registers the built-in stages
(our four filter blocks and datatrove's, the trafilatura extractor), so a config can name them.
"""

from curation.extract import extractors as _extractors  # noqa: F401  (registers "trafilatura")
from curation.filters import blocks as _blocks  # noqa: F401  (registers the four filter blocks, ours and datatrove's)
