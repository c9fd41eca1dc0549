"""What the tests and the benchmarks share: the real-data locator, a local S3 server (moto) and a
Range-honouring HTTP server, corpora built from the shared data, adversarial inputs and the reference
implementations the parity checks compare against. Not shipped in the wheel; no runtime package imports
it (lint-imports), and it imports no test module (tests/test_architecture.py)."""
