"""Document classifiers: a fastText quality model trained here, evaluated, and scored as a column.

    python -m classifiers train-quality --positive FILES --negative FILES --output MODEL_DIR
    python -m classifiers evaluate --model MODEL_DIR --labelled FILE
    python -m classifiers train-toxicity --positive TOXIC --negative CLEAN --output MODEL_DIR
    python -m classifiers score --input DIR --output DIR [--model MODEL_DIR] [--perplexity LM_DIR]
        [--toxicity MODEL]   (Spark)

Modules, one job each: `text` (the one text -> fastText line normalisation every path shares),
`data` (training documents from JSONL / Parquet / text files), `config` (typed training config),
`train`, `model` (load once per process, batched prediction), `metrics` (ROC-AUC and friends in
numpy), `evaluate`, `score` (the per-file stage and its Spark job), `scorer` (the contract of a
score column) with `quality`, `toxicity` (profanity-check or a train-toxicity model), `perplexity`
(the reference-LM scorer), `lm_archive` (loads its torch.export program without running code from
the file), `cli`. The reference LM itself is trained by `python -m workflows train-lm` (workflows/).
Nothing heavy is imported here: fastText and Spark load where they are used (CONVENTIONS 9).
"""
