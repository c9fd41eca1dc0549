"""Refinery's top layer: every multi-step orchestration, built from the packages below it.

    python -m workflows demo         WARCs → extract → dedup → classifiers → tokens → plan → trainer → report
    python -m workflows train-lm     the perplexity scorer's reference LM (tokens, trainer, export)
    python -m workflows ablate       proxy-model ablations of mixture recipes (one trained model per arm, seed)
    python -m workflows ablate-demo  `make ablate`: does each stage of the demo path make the data better?
    python -m workflows compose      regenerate docker-compose.yml from the pipeline definition
    python -m workflows pick-records the first N records a cc-index condition selects (the demo's INDEX=)

Only this layer runs several packages' steps. It calls their functions in-process (an import from above is
what the layers allow), with one exception: training, which is DeepSpeed's launcher by nature and goes
through the one launch builder, trainer/launch.py. No package below starts another package's command
(tests/test_architecture.py checks it).

Modules: `steps` (the one step runner and in-process calls), `paths` (where configs and the shared data
are), `pipeline` (the curation commands, for the demo, the cluster and compose alike), `demo`,
`demo_inputs` (what the demo runs on), `pick_records`, `train_lm`, `ablate`, `ablate_demo`, `compose`, `cli`.
"""
