"""Personal data and secrets out of document text: the scrubber (`scrub`) and its street-address
grammars (`address`; number-last European lines in `address_eu`)."""
