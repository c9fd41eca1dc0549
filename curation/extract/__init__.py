"""HTML to main text: payload decoding (`charset`), the nesting-depth guard run before any parser
(`html_depth`), and the registered extractors, trafilatura and resiliparse (`extractors`)."""
