"""The machinery of bench/curation/langid_accuracy.py on tiny hand-made sets: readers, the
macrolanguage-aware hit, the macro average and the languages lid.176 cannot name."""

from __future__ import annotations

from bench.curation import langid_accuracy as la


def test_nameable_knows_members_and_macrolanguages():
    assert la.nameable("rus") and la.nameable("ru")
    assert la.nameable("zho")  # a macrolanguage: lid.176's zh is cmn, one of its members
    assert la.nameable("est")  # lid.176's et is ekk, a member of est
    assert not la.nameable("zul") and not la.nameable("got")


def test_hit_is_macrolanguage_aware_and_script_free():
    predicted = {"a": "cmn_Hani", "b": "yue_Hani", "c": "hrv_Latn"}
    acc = la.accuracy(predicted.get, {"zho": ["a", "b"], "cmn": ["a", "b"], "bos": ["c"]})
    assert acc["zho"] == (2, 1.0)  # both members of zho
    assert acc["cmn"] == (2, 0.5)  # Cantonese is not Mandarin
    assert acc["bos"] == (1, 0.0)  # Croatian is not Bosnian, though both are hbs


def test_macro_average_leaves_out_unnameable_languages():
    assert la.macro({"rus": (10, 1.0), "deu": (10, 0.5), "zul": (10, 0.0)}) == 0.75


def test_readers(tmp_path):
    sent = tmp_path / "sentences"
    sent.mkdir()
    (sent / "nb.txt").write_text("Dette er en setning.\n\nEn til.\nOg en tredje.\n", encoding="utf-8")
    assert la.leipzig(sent, 2) == {"nob": ["Dette er en setning.", "En til."]}
    tsv = tmp_path / "t.tsv"
    tsv.write_text(
        "CLD2-code\tCLD2-iso-639-3\tTatoeba-iso-639-3\ttext\n"
        "de\tdeu\tdeu\tEin Satz.\nxx-Goth\txx\tgot\tgothic\nde\tdeu\tdeu\tNoch einer.\nde\tdeu\tdeu\tDrei.\n",
        encoding="utf-8",
    )
    assert la.tatoeba(tsv, 2) == {"deu": ["Ein Satz.", "Noch einer."], "got": ["gothic"]}
    assert la.documents(["a", "b", "c"], 2) == ["a\nb", "c"]


def test_table_lists_unnamed_apart():
    out = la.accuracy_table("t", {"rus": (3, 1.0), "zul": (2, 0.0)}, {"rus": (1, 1.0)})
    assert "rus" in out and "macro average over 1 languages: 100.0%" in out
    assert "cannot name (1): zul" in out
