"""The quality score as a document stage, for scoring inside `extract` (`quality.model` in its config).

`extract` names this class by import path (curation.config.QUALITY_ANNOTATOR) and never imports
classifiers: the flow's layers point one way. It is the same `QualityModel.predict_one` that
`python -m classifiers score` uses in batches, so both give the same number for the same text.
Scores only: it never drops a document; a scoring error leaves `quality` null (counter
`quality_error`) and the document is kept, because thresholds belong to the mixture recipe.
"""

from __future__ import annotations

from classifiers.model import check_model_file, load_model, read_metadata
from core.stage import Document, DocumentStage, register


@register("annotator", "quality")
class QualityAnnotator(DocumentStage):
    name = "quality"
    on_error = "keep"

    def __init__(self, model: str) -> None:
        self.model = load_model(model)

    @staticmethod
    def check_model(model: str) -> None:
        """Raises ModelError (a ValueError) naming the folder if it is not a trained model."""
        read_metadata(model)
        check_model_file(model, None)  # model.bin's fastText layout (the hash is checked where it loads)

    @classmethod
    def describe(cls, model: str) -> dict[str, str]:
        """What names its scores in an `extract` fingerprint (`annotators: [{class: quality, model: DIR}]`)."""
        cls.check_model(model)
        return {"model_sha256": read_metadata(model)["model_sha256"]}

    def warm_up(self) -> None:
        self.model.predict_one("This is a short warm-up text. It loads the model once per worker process.")

    def process(self, doc: Document) -> Document:
        doc.metadata["quality"] = self.model.predict_one(doc.text or "")
        return doc
