"""The document-stage contract, its registry, and the one loop that runs stages with bookkeeping.

A document stage is a small class with one method, as datatrove's filters are:

    class MyFilter(DocumentStage):
        name = "my_filter"
        def __init__(self, min_words: int = 5) -> None:
            self.min_words = min_words
        def process(self, doc: Document) -> Document | Drop:
            if len(doc.text.split()) < self.min_words:
                return Drop("too_few_words", detail=f"{len(doc.text.split())} words")
            return doc

`process` returns the document (possibly changed: an extractor sets `text`, an annotator adds a
metadata column) or a `Drop` with a reason.

A rule that compares a measured value with a threshold says so in structured form, so a reader
can print "stop_words 1 < 2" rather than parse prose (the rejected sample's `metric`, `value`,
`threshold` and `op` columns, curation/schema.py):

    Drop("too_few_words", metric="words", value=n, op="<", threshold=self.min_words)

`op` is the comparison that held when the rule dropped the document (`value op threshold` is
true), one of `OPS`. `Rules.check` builds that Drop, and on a pass records the value with
`self.measure(metric, value)`; in annotate mode `run_stages` writes what a document's stages
measured into its `evidence` map (`<stage>/<metric>` -> value), so a kept document carries the
values of the rules it passed. A rule that is no comparison (a URL on a blocklist, "lorem ipsum"
in a line) leaves the four fields None; so does `DatatroveFilter`, since datatrove's
`filter(doc)` returns only a reason. It knows nothing of Spark, stats or output files:
`run_stages` does the counting (documents and bytes in/out per stage, drops per reason), the
timing, the counters a stage adds with `self.count(...)`, and calls `on_drop` so the job can keep
a sample of dropped documents. A stage that raises on one document does not end the file: by
default the document is dropped with reason `<name>_error` (`on_error = "keep"` keeps it instead,
for annotators whose score may stay null). A stage may set `time_budget_s`: a document whose
`process` takes longer is dropped with reason `<name>_time_budget` (a backstop against inputs
that are slow for one stage, counted instead of silently stalling or passing through).

Stages are named in configs by registry name (`register("filter", "gopher_quality")(cls)`, or
`register_path(kind, name, "module:Class")` to import it only when named) or by import path
(`mypkg.filters.MyFilter` or `mypkg.filters:MyFilter`), so a user's stage is a file of theirs, never
an edit of ours. The one registry holds every kind a config or command line names: filter,
extractor, annotator (curation), dedup_stage (dedup) and scorer (classifiers). A class with datatrove's `filter(doc) -> bool | (bool, reason)`
method instead of `process` is adapted (`DatatroveFilter`), so any datatrove filter block works too.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import operator
import time
import typing
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from core.errors import ConfigError
from core.stats import Stats

log = logging.getLogger(__name__)

__all__ = [
    "OPS",
    "DatatroveFilter",
    "Document",
    "DocumentStage",
    "Drop",
    "Rules",
    "build_class",
    "build_stage",
    "class_entries",
    "evidence_key",
    "is_document_stage",
    "register",
    "register_path",
    "registered",
    "resolve_stage",
    "run_stages",
    "utf8_len",
]


@dataclass(slots=True)
class Document:
    """One document as it flows through the stages of a job.

    `text` is None until an extractor fills it from `payload` (the raw HTTP body). `metadata`
    holds every other column of the document row (url, warc_file, lang, quality, ...): a stage
    adds keys, it never removes one it did not add.
    """

    id: str
    text: str | None
    metadata: dict[str, Any] = field(default_factory=dict)
    payload: bytes | None = None
    html: str | None = None
    """The decoded page, set just before the extractor runs."""


OPS: dict[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
"""The comparisons a Drop's `op` may name: `value op threshold` held when the rule dropped."""


@dataclass(frozen=True, slots=True)
class Drop:
    """A stage's decision to drop a document: a reason (counted), a detail (sampled), and for a rule
    that compares a measured value with a threshold, the evidence (`value op threshold` held)."""

    reason: str
    detail: str = ""
    snippet: str | None = None
    """What the rejected sample shows; None: the document's text (or its HTML before extraction)."""
    metric: str | None = None
    """What the rule measured (`stop_words`, `lang_score`): unique within its stage, no `/`."""
    value: float | None = None
    """The measured value on this document."""
    threshold: float | None = None
    """The rule's threshold, as configured for this document (its language's, where per language)."""
    op: str | None = None
    """One of `OPS`: `value op threshold` is the condition that dropped the document."""

    def __post_init__(self) -> None:
        if self.op is not None and self.op not in OPS:
            raise ValueError(f"Drop.op must be one of {', '.join(OPS)}, got {self.op!r}")

    def evidence(self) -> str:
        """`stop_words 1 < 2`, or "" for a drop without a measured value."""
        if self.metric is None or self.value is None:
            return ""
        if self.threshold is None or self.op is None:
            return f"{self.metric} {self.value:g}"
        return f"{self.metric} {self.value:g} {self.op} {self.threshold:g}"


class Rules:
    """Judges a stage's rules on one document, in order: `check` returns the Drop of a rule that
    fails, and records the value of one that passes on `stage` (`DocumentStage.measure`).
    `stage=None` records nothing (a caller outside `run_stages` that wants only the verdict)."""

    __slots__ = ("stage",)

    def __init__(self, stage: DocumentStage | None = None) -> None:
        self.stage = stage

    def check(
        self, reason: str, metric: str, value: float, op: str, threshold: float, detail: str = ""
    ) -> Drop | None:
        if OPS[op](value, threshold):
            return Drop(reason, detail, metric=metric, value=value, threshold=threshold, op=op)
        if self.stage is not None:
            self.stage.measure(metric, value)
        return None


def evidence_key(stage: str, metric: str) -> str:
    """The `evidence` map's key of a stage's metric: `filter:gopher_quality/stop_words`."""
    return f"{stage}/{metric}"


class DocumentStage:
    """Base of every document stage: override `process`, optionally `start_file` and `warm_up`."""

    name: str = ""
    """Funnel row and drop-reason prefix; defaults to the class name."""
    on_error: str = "drop"
    """What an exception on one document does: "drop" (reason `<name>_error`) or "keep" (counted)."""
    snippet_on_error: bool = True
    """False for a stage whose input must not be shown (a PII scrubber that failed on it)."""
    time_budget_s: float | None = None
    """Seconds one document may take in `process`; a document over it is dropped with reason
    `<name>_time_budget` (its result discarded, so a slow scrubber's output is never written).
    Checked after `process` returns: it bounds what is kept, not the wall time spent. None: none."""
    annotatable: bool = False
    """True for a filter: in annotate mode (`run_stages(annotate=True)`) its drop is recorded on the
    document instead of ending it. False for stages that cannot make a document (reading,
    extraction) or whose drop protects the output (a PII scrub that failed)."""
    columns: dict[str, Any] = {}  # noqa: RUF012 - read-only class default
    """Arrow types of the metadata keys this stage adds beyond the job's document row (an
    annotator's score, e.g. {"my_score": pyarrow.float32()}): the job writes them as columns."""

    def process(self, doc: Document) -> Document | Drop:  # pragma: no cover - the contract
        return doc

    def start_file(self) -> None:
        """Called before the first document of every input file (reset per-file caches)."""

    def warm_up(self) -> None:
        """Load models once per worker process, so per-stage seconds measure documents."""

    @property
    def error_reason(self) -> str:
        return f"{self.name or type(self).__name__}_error"

    @property
    def time_budget_reason(self) -> str:
        return f"{self.name or type(self).__name__}_time_budget"

    def count(self, key: str, n: int = 1) -> None:
        """Add to a free-form counter of the job's stats (e.g. a charset source, a language)."""
        counters = self.__dict__.setdefault("_counters", Counter())
        counters[key] += n

    def take_counters(self) -> Counter | None:
        return self.__dict__.pop("_counters", None)

    def measure(self, metric: str, value: float) -> None:
        """Record the value a rule measured on the current document and let pass (annotate mode
        writes it into the document's `evidence` map; drop mode discards it)."""
        self.__dict__.setdefault("_evidence", {})[metric] = value

    def take_evidence(self) -> dict[str, float] | None:
        return self.__dict__.pop("_evidence", None)

    def adopt(self, inner: DocumentStage) -> None:
        """Take the counters and measured values of a stage this one wraps (a FilterStep's block)."""
        for k, n in (inner.take_counters() or {}).items():
            self.count(k, n)
        for metric, value in (inner.take_evidence() or {}).items():
            self.measure(metric, value)


class DatatroveFilter(DocumentStage):
    """Adapts a datatrove filter block (`filter(doc) -> bool | (bool, reason)`) to the contract.

    Its drops carry no metric, value or threshold: datatrove's `filter` returns only a reason."""

    def __init__(self, block: Any, name: str = "") -> None:
        self.block = block
        self.name = name or getattr(block, "name", "") or type(block).__name__

    def process(self, doc: Document) -> Document | Drop:
        from datatrove.data import Document as DtDocument

        result = self.block.filter(DtDocument(text=doc.text, id=doc.id, metadata={}))
        if isinstance(result, tuple):
            keep, why = result[0], (result[1] if len(result) > 1 else None)
        else:
            keep, why = bool(result), None
        return doc if keep else Drop(why or "dropped")


# -- registry ------------------------------------------------------------------------------------

_REGISTRY: dict[str, dict[str, type | str]] = {}
"""kind -> name -> class, or the class's import path (`register_path`: imported on first use)."""


def register(kind: str, name: str) -> Callable[[type], type]:
    """Class decorator: make a stage class available to configs as `name` among `kind` stages."""

    def deco(cls: type) -> type:
        _REGISTRY.setdefault(kind, {})[name] = cls
        return cls

    return deco


def register_path(kind: str, name: str, path: str) -> None:
    """Register `name` among `kind` by import path (`module:Class`): the class is imported only when
    a config names it, so the registering module imports no model code, and a lower layer can name a
    class of a later one (curation names classifiers' quality annotator)."""
    _REGISTRY.setdefault(kind, {}).setdefault(name, path)


def registered(kind: str) -> dict[str, type | str]:
    return dict(_REGISTRY.get(kind, {}))


def is_document_stage(obj: type) -> bool:
    """A DocumentStage, or a class with datatrove's `filter(doc)` (adapted by `DatatroveFilter`)."""
    return issubclass(obj, DocumentStage) or callable(getattr(obj, "filter", None))


def resolve_stage(kind: str, spec: str, key: str, base: type | None = None) -> type:
    """The class a config names: a registry name of `kind`, or an import path. ConfigError names `key`.

    The class must be a subclass of `base`, or, without one, a document stage (`is_document_stage`):
    the one registry serves extract's stages, dedup's stages and the scorers.
    """
    if not isinstance(spec, str) or not spec:
        raise ConfigError(f"{key} must be a registry name or an import path, got {spec!r}")
    known = _REGISTRY.get(kind, {})
    path = known.get(spec, spec)
    if isinstance(path, type):
        return path
    module, sep, attr = path.partition(":") if ":" in path else path.rpartition(".")
    if not sep or not module or not attr:
        raise ConfigError(
            f"{key}: unknown {kind} {spec!r}; registered: {', '.join(sorted(known)) or 'none'} "
            "(or give an import path, e.g. mypkg.filters.MyFilter)"
        )
    try:
        obj = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"{key}: cannot import {path!r}: {type(e).__name__}: {e}") from None
    ok = isinstance(obj, type) and (issubclass(obj, base) if base is not None else is_document_stage(obj))
    if not ok:
        what = (
            f"a subclass of {base.__module__}.{base.__qualname__}"
            if base is not None
            else ("a document stage (a class with process(doc) or filter(doc))")
        )
        raise ConfigError(f"{key}: {spec!r} is not {what}")
    if spec in known:
        known[spec] = obj  # imported once
    return obj


def class_entries(entries: Iterable[Any], key: str) -> list[tuple[str, dict[str, Any]]]:
    """(class spec, arguments) of each entry of a config list that names classes: a registry name
    or import path, or a mapping `{class: <name or path>, <its arguments>}`."""
    out = []
    for i, e in enumerate(entries):
        spec, args = (
            (e.get("class"), {k: v for k, v in e.items() if k != "class"}) if isinstance(e, dict) else (e, {})
        )
        if not isinstance(spec, str) or not spec:
            raise ConfigError(f"{key}[{i}] must be a registry name, an import path or a mapping with `class`")
        out.append((spec, args))
    return out


def check_arguments(cls: type, kwargs: dict[str, Any], key: str) -> None:
    """Refuse arguments the class does not take, or of a type its annotations refuse, naming the config key.

    Checked before any work starts, so `stop_words: [[a, b]]` says "stop_words[0] must be a string"
    instead of the constructor's own "unhashable type: 'list'".
    """
    try:
        sig = inspect.signature(cls.__init__)
    except (TypeError, ValueError):
        return
    params = {n: p for n, p in sig.parameters.items() if n != "self"}
    if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        allowed = {n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        for arg in kwargs:
            if arg not in allowed:
                raise ConfigError(
                    f"{key}.{arg} is not an argument of {cls.__module__}.{cls.__qualname__}; "
                    f"allowed: {', '.join(sorted(allowed)) or 'none'}"
                )
    _check_argument_types(cls, kwargs, key)


def _check_argument_types(cls: type, kwargs: dict[str, Any], key: str) -> None:
    """Validate each argument against the constructor's annotation (pydantic's lax rules)."""
    from pydantic import TypeAdapter, ValidationError

    if cls.__module__.partition(".")[0] == "datatrove":
        # datatrove's hints are looser than its code (`min_avg_word_length: int` compared as a float
        # average): its arguments are checked by name only (curation/config.py), as datatrove does
        return
    try:
        hints = typing.get_type_hints(cls.__init__)
    except Exception:  # unresolvable annotations (a third-party class): nothing to check against
        return
    for arg, value in kwargs.items():
        hint = hints.get(arg)
        if hint is None or hint is Any:
            continue
        try:
            adapter = TypeAdapter(hint)
        except Exception:  # an annotation pydantic cannot check (a protocol, a callable): skip it
            continue
        try:
            adapter.validate_python(value)
        except ValidationError as e:
            err = e.errors(include_url=False)[0]
            where = "".join(f"[{p}]" for p in err["loc"] if isinstance(p, int))
            raise ConfigError(
                f"{key}.{arg}{where}: {err['msg'][0].lower()}{err['msg'][1:]}, got {err.get('input')!r:.80}"
            ) from None


def build_class(kind: str, spec: str, kwargs: dict[str, Any], key: str, base: type | None = None) -> Any:
    """Instantiate the class a config names (`resolve_stage`), its arguments checked first."""
    cls = resolve_stage(kind, spec, key, base)
    check_arguments(cls, kwargs, key)
    return cls(**kwargs)


def build_stage(kind: str, spec: str, kwargs: dict[str, Any], key: str, name: str = "") -> DocumentStage:
    """Instantiate the stage a config names; a datatrove-style filter class is adapted."""
    obj = build_class(kind, spec, kwargs, key)
    stage = obj if isinstance(obj, DocumentStage) else DatatroveFilter(obj, name)
    if name and not stage.name:
        stage.name = name
    return stage


# -- the loop ------------------------------------------------------------------------------------


def utf8_len(s: str) -> int:
    return len(s.encode("utf-8", "surrogatepass"))


# The clock of `run_stages`, a module global so that tests of time budgets can substitute a fake.
_clock = time.perf_counter

OnDrop = Callable[[str, Document, Drop], None]
"""(stage name, document as the stage saw it, drop) -> None: e.g. keep a rejected sample."""


def run_stages(
    doc: Document,
    stages: Iterable[DocumentStage],
    stats: Stats,
    on_drop: OnDrop,
    annotate: bool = False,
) -> Document | None:
    """Run one document through `stages` in order; the document, or None once a stage dropped it.

    Bytes are UTF-8 bytes of the text a stage received (the raw payload before extraction), so a
    stage's bytes out are the next one's bytes in.

    `annotate`: a drop by an `annotatable` stage (a filter) is counted and sampled exactly as in
    drop mode, then recorded on the document (`drop_stage`, `drop_reason`) instead of ending it; the
    document goes on through the later stages that are not filters (see `_after_annotation`). The
    values each stage measured (`DocumentStage.measure`, and the failing rule's `Drop.value`) go
    into the document's `evidence` map, keyed `evidence_key(stage, metric)`.
    """
    stages = list(stages)
    if annotate and doc.metadata.get("drop_stage") is not None:
        return _after_annotation(doc, stages, stats)  # annotated by an earlier call (a later part of a plan)
    text, nbytes = doc.text, (utf8_len(doc.text) if doc.text is not None else len(doc.payload or b""))
    for i, stage in enumerate(stages):
        st = stats.stage(stage.name)
        t0 = _clock()
        st.docs_in += 1
        st.bytes_in += nbytes
        result = _call(stage, doc, stats, t0, keep_counters=True)
        measured = stage.take_evidence()  # taken in every mode: a value never outlives its document
        if isinstance(result, Drop):
            st.drops[result.reason] += 1
            st.drop_bytes[result.reason] += nbytes
            st.seconds += _clock() - t0
            on_drop(stage.name, doc, result)
            if annotate and stage.annotatable:
                _record_evidence(doc, stage.name, measured, result)
                doc.metadata["drop_stage"], doc.metadata["drop_reason"] = stage.name, result.reason
                return _after_annotation(doc, stages[i + 1 :], stats)
            return None
        doc = result
        if annotate and measured:
            _record_evidence(doc, stage.name, measured)
        if doc.text is not text:
            text, nbytes = doc.text, (utf8_len(doc.text) if doc.text is not None else 0)
        st.docs_out += 1
        st.bytes_out += nbytes
        st.seconds += _clock() - t0
    return doc


def _record_evidence(
    doc: Document, stage: str, measured: dict[str, float] | None, drop: Drop | None = None
) -> None:
    """Add a stage's measured values (and the failing rule's) to the document's `evidence` map.
    A new dict each time: an attempt of `extract.mode: union` works on a shallow copy of the metadata."""
    new = {evidence_key(stage, m): float(v) for m, v in (measured or {}).items()}
    if drop is not None and drop.metric is not None and drop.value is not None:
        new[evidence_key(stage, drop.metric)] = float(drop.value)
    if new:
        doc.metadata["evidence"] = {**(doc.metadata.get("evidence") or {}), **new}


def _call(
    stage: DocumentStage, doc: Document, stats: Stats, t0: float, keep_counters: bool
) -> Document | Drop:
    """`stage.process(doc)` with the contract's error and time-budget rules; its counters go to `stats`."""
    try:
        result = stage.process(doc)
    except Exception as e:  # one bad document never ends the file
        stage.take_evidence()  # what a stage that raised half-way measured is not kept
        result = _on_exception(stage, doc, e, stats if keep_counters else Stats())
    counters = stage.take_counters()
    budget = stage.time_budget_s
    if budget is not None and _clock() - t0 > budget:
        result = _over_budget(stage, doc, _clock() - t0)
        counters = None  # the result is discarded, so are the counts of what it found
        stage.take_evidence()  # and the values it measured
    if counters and keep_counters:
        stats.counters.update(counters)
    return result


def _after_annotation(doc: Document, rest: list[DocumentStage], stats: Stats) -> Document | None:
    """The rest of the stages for a document annotated as dropped (annotate mode).

    Later filters are skipped: the first drop is the one recorded, and cumulative arms of an ablation
    (`+langid`, `+filters`) need no more. Stages that are not filters still run, because what docs/
    holds must be what it always is: PII scrubbed (a scrub that fails still drops the document, never
    written unscrubbed), annotators' columns filled. They are not counted in the funnel's rows, nor
    are their counters, so the funnel and counters say what drop mode says; counters
    `annotated:<stage>` count these extra passes and `annotated_drop:<reason>` what they dropped.
    """
    for stage in rest:
        if stage.annotatable:
            continue
        stats.counters[f"annotated:{stage.name}"] += 1
        result = _call(stage, doc, stats, _clock(), keep_counters=False)
        stage.take_evidence()  # the document's evidence is that of the stages up to its drop
        if isinstance(result, Drop):
            stats.counters[f"annotated_drop:{result.reason}"] += 1
            return None
        doc = result
    return doc


def _over_budget(stage: DocumentStage, doc: Document, seconds: float) -> Drop:
    log.warning(
        "stage %s took %.1f s on %s (budget %s s): dropped", stage.name, seconds, doc.id, stage.time_budget_s
    )
    detail = f"{seconds:.1f} s > time budget {stage.time_budget_s} s"
    return Drop(
        stage.time_budget_reason,
        detail,
        snippet=None if stage.snippet_on_error else "",
        metric="seconds",
        value=seconds,
        threshold=stage.time_budget_s,
        op=">",
    )


def _on_exception(stage: DocumentStage, doc: Document, e: Exception, stats: Stats) -> Document | Drop:
    log.warning("stage %s failed on %s: %s: %s", stage.name, doc.id, type(e).__name__, e)
    if stage.on_error == "keep":
        stats.counters[stage.error_reason] += 1
        return doc
    return Drop(stage.error_reason, str(e)[:300], snippet=None if stage.snippet_on_error else "")
