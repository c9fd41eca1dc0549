"""Drivers around the CLIs: the pipeline's command definitions, `make demo`, the compose file generator."""
