"""Personal data and secrets out of document text: the scrubber (`scrub`: configuration, overlap
resolution, the `pii` stage) and one module per detector (`email`, `ip`, `phone`, `card`, `iban`,
`ssn`, `secret`, `address` with number-last European lines in `address_eu`; `isbn`, the context
rule cards and phones share)."""
