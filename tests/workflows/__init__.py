"""Tests of workflows/: the pipeline definition, docker-compose.yml, the demo, train-lm's and the ablations' drivers."""
