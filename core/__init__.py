"""The shared core every package builds on, and the only package every other one may import.

    config    one loader: YAML + `section.key=value` overrides -> typed pydantic models, ConfigError
    errors    UserError and its kinds (ConfigError, InputError, OutputConflict): exit status 2
    output    OutputDir: config guard with fingerprint, atomic writes, per-unit completion markers
    stats     per-stage counters (docs/bytes in and out, drops per reason, seconds) and the funnel
    spark     the one SparkSession builder and `--spark-conf`
    runner    the one per-file Spark runner (extract, tokenize and score are jobs of it)
    stage     the document-stage contract (keep, change or drop with a reason) and its registry
    selectors recipe `select:` conditions on document columns
    files     the documents-folder listing rule, sha256 of a file
    cli       shared arguments, exit statuses and the funnel print of every command line

Nothing here imports a later package (curation, dedup, classifiers, tokens, mixtures, trainer,
report); `lint-imports` checks it.
"""
