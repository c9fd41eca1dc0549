"""Tests of scripts/: the pipeline definition, docker-compose.yml and the demo driver."""
