"""Settings that switch every rule of a heuristic filter block off, so a test can turn on one rule at a
time (tests/curation/test_textfilters.py, tests/classifiers/test_evaluate_signals.py)."""

OFF_QUALITY = {
    k: None
    for k in (
        "min_doc_words",
        "max_doc_words",
        "min_avg_word_length",
        "max_avg_word_length",
        "max_symbol_word_ratio",
        "max_bullet_lines_ratio",
        "max_ellipsis_lines_ratio",
        "max_non_alpha_words_ratio",
        "min_stop_words",
    )
}
OFF_REPETITION = {
    "dup_line_frac": None,
    "dup_para_frac": None,
    "dup_line_char_frac": None,
    "dup_para_char_frac": None,
    "top_n_grams": (),
    "dup_n_grams": (),
}
# FineWeb's rules have no off switch: these values can never fire (ratios are in [0, 1]).
OFF_FINEWEB = {
    "line_punct_thr": 0.0,
    "short_line_thr": 1.0,
    "char_duplicates_ratio": 1.0,
    "new_line_ratio": 1e9,
}
