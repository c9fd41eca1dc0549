"""Per-language curation settings (issue 43 item 2): one YAML file per language in configs/languages/.

Each file (`rus_Cyrl.yaml`) holds what FineWeb-2 sets per language: the LID threshold, the word
segmenter, and the keyword arguments of our Gopher repetition, Gopher quality and FineWeb quality
blocks (curation/filters/text.py, datatrove's argument names, stop words included as GopherQuality's
`stop_words`), plus whether C4's block runs (English only, as in FineWeb-2). `settings_for(code)` is
the one reader:

    s = settings_for("rus_Cyrl")
    GopherQuality(**s.gopher_quality.kwargs()); s.lid_threshold; s.segmenter   # "spacy:ru"

Which file: `xxx_Scrp.yaml` if there is one; else the file of the code's macrolanguage in the same
script (lid.176's `fa` is `pes_Arab`, FineWeb-2 names Persian `fas_Arab`); else `default.yaml`.
Another script of the same language is never used: the thresholds and stop words of `srp_Cyrl`
say nothing about text in `srp_Latn`.

Where the values come from:
- the 50 largest FineWeb-2 subsets by words: FineWeb-2's own configs (huggingface/fineweb-2,
  configs/<code>.yml), converted by `from_fineweb2` the way fineweb-2-pipeline.py passes each key to
  datatrove's blocks, with its shared settings (dup_para_frac=0, dup_para_char_frac=0,
  dup_line_char_frac=0, short_line_thr=999, char_duplicates_ratio=0.1, min_stop_words=2; no C4).
  `python -m curation import-fineweb2 FW2_GIT_DIR --out configs/languages --force` rewrites them (`write_fineweb2`);
- eng_Latn: FineWeb's English settings (datatrove's defaults, LID 0.65, C4 on);
- default.yaml: see `default_from_fineweb2`;
- a language of your own: `python -m curation derive-language` (`derive_settings`) measures a
  reference text in that language.

Caveat: FineWeb-2's LID thresholds are GlotLID v3 probabilities; lid.176 (this project's default
model) scores differently. `derive-language` measures the threshold with the model we run.

One module per job, each importing only those below it (a layers contract in pyproject.toml):

    derive.py      a language's settings measured on reference text (derive-language)
    fineweb2.py    FineWeb-2's configs as our files (import-fineweb2)
    lid_tables.py  LID thresholds measured with the model that runs (calibrate-lid, models/)
    files.py       where a command may write, atomic writes, streamed reference reading
    lookup.py      which file a language reads (settings_for, lid_threshold_for), cached
    schema.py      what a file and a table hold, and their checks

Code imports the module it needs (`from curation.languages.lookup import settings_for`); this file
re-exports their public names, so a reader or a test can take the whole API as one namespace.
"""

from curation.languages.derive import (
    ENGLISH_BASELINE,
    MAX_DOC_CHARS,
    MAX_REFERENCE_CHARS,
    MAX_REFERENCE_LINES,
    Reference,
    ReferenceStats,
    derive_from_files,
    derive_settings,
    lid_scores,
    read_reference,
    reference_stats,
    stop_words,
)
from curation.languages.files import (
    MAX_LINE_CHARS,
    check_out,
    dump,
    header,
    is_regular,
    iter_lines,
    open_regular,
    write_settings,
    write_text_atomic,
)
from curation.languages.fineweb2 import (
    FW2_REPO,
    default_from_fineweb2,
    english_settings,
    from_fineweb2,
    write_fineweb2,
)
from curation.languages.lid_tables import (
    MIN_LID_LINES,
    calibrate_lid,
    lid_threshold,
    reference_lines,
    write_model_thresholds,
)
from curation.languages.lookup import (
    SAME_WRITTEN_LANGUAGE,
    check_folder,
    lid_threshold_for,
    load_settings,
    lowest_lid_threshold,
    model_thresholds,
    settings_for,
)
from curation.languages.schema import (
    DEFAULT,
    ENGLISH_DUP_N_GRAMS,
    ENGLISH_LID_THRESHOLD,
    ENGLISH_STOP_WORDS,
    ENGLISH_TOP_N_GRAMS,
    FOLDER,
    LID_CAP,
    LID_FLOOR,
    MODELS,
    SHIPPED,
    FineWebQualitySettings,
    GopherQualitySettings,
    GopherRepetitionSettings,
    LanguageSettings,
    ModelThresholds,
    check_language,
    check_segmenter,
    default_segmenter,
)

__all__ = [
    "DEFAULT", "ENGLISH_BASELINE", "ENGLISH_DUP_N_GRAMS", "ENGLISH_LID_THRESHOLD", "ENGLISH_STOP_WORDS",
    "ENGLISH_TOP_N_GRAMS", "FOLDER", "FW2_REPO", "LID_CAP", "LID_FLOOR", "MAX_DOC_CHARS", "MAX_LINE_CHARS",
    "MAX_REFERENCE_CHARS", "MAX_REFERENCE_LINES", "MIN_LID_LINES", "MODELS", "SAME_WRITTEN_LANGUAGE",
    "SHIPPED", "FineWebQualitySettings", "GopherQualitySettings", "GopherRepetitionSettings",
    "LanguageSettings", "ModelThresholds", "Reference", "ReferenceStats", "calibrate_lid", "check_folder",
    "check_language", "check_out", "check_segmenter", "default_from_fineweb2", "default_segmenter",
    "derive_from_files", "derive_settings", "dump", "english_settings", "from_fineweb2", "header",
    "is_regular", "iter_lines", "lid_scores", "lid_threshold", "lid_threshold_for", "load_settings",
    "lowest_lid_threshold", "model_thresholds", "open_regular", "read_reference", "reference_lines",
    "reference_stats", "settings_for", "stop_words", "write_fineweb2", "write_model_thresholds",
    "write_settings", "write_text_atomic",
]  # fmt: skip
