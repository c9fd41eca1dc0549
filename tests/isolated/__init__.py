"""The `isolated` tier: jobs on a Spark standalone cluster whose workers each have a private /tmp and share
only an S3 server with the driver (testkit/isolated.py), as executors on other machines would."""
