"""Config loading: typed, validated on load, errors that name the file and the key."""

from __future__ import annotations

import pytest

from curation.config import ConfigError, ExtractJobConfig


def _load(tmp_path, text):
    p = tmp_path / "c.yaml"
    p.write_text(text)
    return ExtractJobConfig.load(p)


def test_defaults_are_fineweb_settings():
    cfg = ExtractJobConfig()
    assert cfg.langid.languages == ("en",) and cfg.langid.threshold == 0.65
    assert cfg.extract.favor_precision is True
    assert cfg.filters.c4_quality == {"filter_no_terminal_punct": False}
    assert list(cfg.filters.enabled()) == [
        "gopher_repetition",
        "gopher_quality",
        "c4_quality",
        "fineweb_quality",
    ]


def test_yaml_overrides_and_fingerprint(tmp_path):
    cfg = _load(tmp_path, "langid:\n  languages: [en, de]\n  threshold: 0.5\nfilters:\n  c4_quality: null\n")
    assert cfg.langid.languages == ("en", "de") and cfg.filters.c4_quality is None
    assert cfg.fingerprint() != ExtractJobConfig().fingerprint()
    assert _load(tmp_path, "{}").fingerprint() == ExtractJobConfig().fingerprint()


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (
            "langid:\n  treshold: 0.5\n",
            "unknown key langid.treshold; allowed: labels, languages, model_path, threshold, thresholds, top_scores_min",
        ),
        ("langid:\n  threshold: 2\n", "langid.threshold must be in [0, 1]"),
        ("extract:\n  timeout_s: fast\n", "extract.timeout_s must be a number"),
        ("reader:\n  engine: spark\n", "reader.engine must be one of warcio, fastwarc"),
        ("langid:\n  languages: en\n", "langid.languages must be a list"),
        ("- a\n- b\n", "top level must be a mapping"),
        ("filters:\n  c4_quality: {bogus: 1}\n", "filters.c4_quality.bogus is not an argument"),
    ],
)
def test_errors_name_file_and_key(tmp_path, text, needle):
    with pytest.raises(ConfigError) as e:
        _load(tmp_path, text)
    assert needle in str(e.value)
    assert str(tmp_path / "c.yaml") in str(e.value)


def test_shipped_example_config_documents_the_defaults():
    from testkit.shared_data import REPO_ROOT

    assert ExtractJobConfig.load(REPO_ROOT / "configs" / "extract.yaml") == ExtractJobConfig()


def test_resiliparse_preset_extracts_every_page_with_resiliparse_alone(warc_dir, tmp_path):
    """configs/extract-resiliparse.yaml changes only the extractor: a real WARC through the pipeline
    keeps documents whose text is resiliparse's main content of their page."""
    import json

    import pyarrow.parquet as pq

    from core.output import OutputDir
    from curation.extract.extractors import Resiliparse
    from curation.pipeline import process_file
    from curation.warc.records import Page, iter_records
    from testkit.shared_data import REPO_ROOT

    preset = REPO_ROOT / "configs" / "extract-resiliparse.yaml"
    assert ExtractJobConfig.load(preset).replace(extract=ExtractJobConfig().extract) == ExtractJobConfig()
    cfg = ExtractJobConfig.load(preset, ["pii.enabled=false"])  # the text as extracted, unscrubbed
    uri = warc_dir / "crawl-2024-sample-0000.warc.gz"
    OutputDir(tmp_path).prepare("extract", cfg.to_dict(), cfg.fingerprint())
    res = process_file(str(uri), cfg, str(tmp_path))
    docs = pq.read_table(tmp_path / "docs" / f"{res['unit']}.parquet").to_pylist()
    assert docs and json.loads((tmp_path / "stats" / f"{res['unit']}.json").read_text())[
        "docs_written"
    ] == len(docs)
    from curation.extract.charset import decode_html

    pages = {
        p.url: decode_html(p.payload, p.content_type)[0]
        for p in iter_records(str(uri), cfg.reader)
        if isinstance(p, Page) and p.kind == "html"
    }
    ours = Resiliparse(cfg.extract)
    for d in docs:
        assert d["text"] == ours(pages[d["url"]]).text, d["url"]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("pii:\n  types: [email, name]\n", "pii.types: unknown PII type 'name'"),
        ("pii:\n  placeholders: {mail: x}\n", "pii.placeholders: unknown PII type 'mail'"),
        ("pii:\n  enabled: yes please\n", "pii.enabled must be true or false"),
        ("quality:\n  model: /nonexistent/model\n", "quality.model: model folder not found"),
        ("quality:\n  threshold: 0.5\n", "unknown key quality.threshold; allowed: model"),
    ],
)
def test_pii_and_quality_errors_name_the_key(tmp_path, text, needle):
    with pytest.raises(ConfigError) as e:
        _load(tmp_path, text)
    assert needle in str(e.value)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("annotators: [nosuch.module:Cls]\n", "annotators[0].class: cannot import 'nosuch.module:Cls'"),
        ("annotators: {model: x}\n", "annotators[0] must be a registry name, an import path or a mapping"),
        ("annotators: [{class: quality, model: /nonexistent}]\n", "annotators[0]: model folder not found"),
        ("annotators: [{class: quality, modle: x}]\n", "annotators[0].modle is not an argument"),
        (
            "extract:\n  extractors: [{class: resiliparse, timeout_s: 1}]\n",
            "takes the keys of the extract section",
        ),
        ("extract:\n  extractors: [core.stage.Drop]\n", "extract.extractors[0]: 'core.stage.Drop' is not a"),
    ],
)
def test_annotator_and_extractor_entries_name_the_key(tmp_path, text, needle):
    """`annotators:` (one entry or a list) and `extract.extractors` entries resolve through the one
    registry (core/stage.py) and fail on load, naming the entry."""
    with pytest.raises(ConfigError) as e:
        _load(tmp_path, text)
    assert needle in str(e.value)


def test_one_annotator_is_a_one_entry_list_and_none_keeps_the_fingerprint():
    one = ExtractJobConfig.from_dict({"annotators": "core.stage.DocumentStage"})
    listed = ExtractJobConfig.from_dict({"annotators": ["core.stage.DocumentStage"]})
    assert one == listed and one.annotator_specs() == [("core.stage.DocumentStage", {}, "annotators[0]")]
    assert one.fingerprint() != ExtractJobConfig().fingerprint()
    assert ExtractJobConfig.from_dict({"annotators": []}).fingerprint() == ExtractJobConfig().fingerprint()


def test_schema_pii_fields_follow_the_scrubber():
    from curation.pii.scrub import PII_TYPES
    from curation.schema import PII_COUNT_FIELDS

    assert PII_COUNT_FIELDS == PII_TYPES
    assert ExtractJobConfig().pii.types == PII_TYPES
