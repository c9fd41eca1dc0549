"""Reading WARC files: pages out of whole files (`records`, with the `warcio` and `fastwarc` engines)
and byte ranges at gzip member boundaries, so one large WARC becomes several units (`ranges`)."""
