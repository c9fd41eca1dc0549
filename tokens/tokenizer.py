"""Byte-level BPE tokenizer: trained with Hugging Face `tokenizers` on a deterministic document sample.

`train-tokenizer` reads curated documents (Parquet with a `text` column), picks a sample that does
not depend on file order or count (the `sample_docs` documents with the smallest keyed hash of
their `id`), trains GPT-2-style byte-level BPE (ByteLevel pre-tokenizer and decoder, every byte in
the initial alphabet, so any text encodes and decodes losslessly) and writes:

    tokenizer.json        the Hugging Face tokenizer (usable by `tokenizers` / `transformers`)
    tokenizer_meta.json   config + fingerprint that made it, EOD token and id, sample provenance, sha256

Input and output may each be a local folder or an object-store prefix (`s3://`, core/storage.py):
the listing is core.files' one rule for both (`doc_parquet_uris`, marker first), the reads are
core.files.open_parquet (ranged reads on a store: the footer, the `id` column, then the `text` of
only the row groups holding sampled rows), and the two files are whole-object writes, meta last (a
folder with tokenizer.json but no meta is an interrupted run). The driver holds the sample's ids
and texts only, whatever the input's size. The same input and config give a byte-identical
tokenizer.json, from a local folder or its copy on a store (tests/tokens/test_tokenizer*.py).
A given tokenizer.json (e.g. a released model's, local or on a store) is used as is; its EOD token
comes from `tokenizer_meta.json` beside it, or `--eod-token`, or the first known end-of-text
token it defines.

Encoding documents (`build_encoder`): HF `tokenizers` encodes byte-level BPE at ~0.4-0.8 M tokens/s
on one core; `tiktoken` runs the same algorithm (GPT-2 regex split, then rank-ordered byte-pair
merges) ~4x faster. `build_encoder` builds a `tiktoken.Encoding` from the tokenizer.json when that
gives the HF token ids exactly, and otherwise falls back to HF with the reason logged. "Exactly" is
checked, not assumed (see `_tiktoken_encoding`): the tokenizer.json must be the plain GPT-2 shape
(no normalizer, ByteLevel pre-tokenizer with its regex and no prefix space, plain BPE, only special
added tokens, which documents never produce), merge order must equal id order (tiktoken ranks a
merge by the id of its result, HF by the merge's position), every token must be what HF's own
merges give for its bytes (tiktoken looks a whole piece up first), and a probe of tricky strings
must encode identically. tests/tokens/test_tokenizer_fast.py compares both paths on real data.
"""

from __future__ import annotations

import bisect
import hashlib
import heapq
import itertools
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import model_validator

from core.config import ConfigError, ConfigModel, check_positive, fingerprint_of, load_config
from core.errors import InputError
from core.files import doc_parquet_uris, open_parquet, parquet_schema
from core.output import atomic_write_bytes, atomic_write_json, check_folder_path
from core.safe_json import JSONFileError, loads_checked
from core.storage import is_object_store, is_remote, join, open_store

log = logging.getLogger(__name__)

# End-of-text tokens of common released tokenizers (GPT-2/Qwen, Llama 3, Llama 2/Mistral, Gemma).
KNOWN_EOD_TOKENS = ("<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>")


class TokenizerConfig(ConfigModel):
    """What `train-tokenizer` trains (configs/tokenizer.yaml); its fingerprint names the tokenizer."""

    vocab_size: int = 32768
    """Final vocabulary size, special tokens and the 256 byte symbols included."""
    eod_token: str = "<|endoftext|>"
    """End-of-document token: appended to every document in the shards."""
    special_tokens: tuple[str, ...] = ("<|pad|>",)
    """Further special tokens (ids right after the EOD token, which is id 0)."""
    min_frequency: int = 2
    """A pair must occur at least this often to be merged."""
    sample_docs: int = 200_000
    """Documents in the training sample (all of them when there are fewer)."""
    max_chars_per_doc: int = 100_000
    """Longer documents are cut to this many characters for training (bounds memory)."""
    seed: int = 0
    """Keys the hash that picks the sample."""

    @model_validator(mode="after")
    def _check(self) -> TokenizerConfig:
        specials = (self.eod_token, *self.special_tokens)
        if self.vocab_size < 256 + len(specials) + 1:
            raise ConfigError(
                f"vocab_size must be >= {256 + len(specials) + 1} (256 bytes + special tokens + 1 merge), "
                f"got {self.vocab_size}"
            )
        if not self.eod_token:
            raise ConfigError("eod_token must be a non-empty string")
        if len(set(specials)) != len(specials):
            raise ConfigError(f"special_tokens must be distinct and not repeat eod_token; got {specials}")
        for key in ("min_frequency", "sample_docs", "max_chars_per_doc"):
            check_positive(key, getattr(self, key))
        return self

    def fingerprint(self) -> str:
        """sha256 of the compact sorted JSON of `to_dict()`, 12 hex digits (recorded in tokenizer_meta.json)."""
        return fingerprint_of(self.to_dict())

    @classmethod
    def load(cls, path: str | Path | None, overrides: Iterable[str] = ()) -> TokenizerConfig:
        """Defaults when `path` is None; else the YAML file; then `key=value` overrides; validated."""
        return load_config(cls, path, overrides)


@dataclass(frozen=True, slots=True)
class LoadedTokenizer:
    """A tokenizer ready to encode documents: the HF object, its EOD id and identity."""

    tokenizer: Any
    eod_token: str
    eod_id: int
    vocab_size: int
    sha256: str
    path: str
    """Absolute local path or object-store URI of the tokenizer.json read."""
    tokenizer_json: str = field(default="", repr=False)
    """Its text, as read (what the tokenize tasks build their encoder from)."""
    meta: dict[str, Any] = field(default_factory=dict)


def sample_key(seed: int, doc_id: str) -> bytes:
    return hashlib.blake2b(f"{seed}:{doc_id}".encode(), digest_size=8).digest()


def select_sample(files: list[str], cfg: TokenizerConfig) -> list[tuple[bytes, int, int]]:
    """(key, index in `files`, row) of the `sample_docs` documents with the smallest keys, in key order.

    Reads only the `id` column, so choosing the sample costs little even on big inputs; the choice
    is independent of how documents are split into files. Ties (a repeated id) go by listing order.
    """
    best: list[tuple[bytes, int, int]] = []
    for i, f in enumerate(files):
        with open_parquet(f) as pf:
            ids = pf.read(columns=["id"]).column("id").to_pylist()
        best += [(sample_key(cfg.seed, str(doc_id)), i, row) for row, doc_id in enumerate(ids)]
        # Prune now and then so memory stays O(sample_docs), not O(all documents).
        if len(best) > 4 * cfg.sample_docs:
            best = heapq.nsmallest(cfg.sample_docs, best)
    return sorted(heapq.nsmallest(cfg.sample_docs, best))


def read_sample_texts(files: list[str], sample: list[tuple[bytes, int, int]], max_chars: int) -> list[str]:
    """The sampled documents' texts (cut to `max_chars`; null -> ""), in sample order.

    Only the row groups that hold a sampled row are read, one at a time: on an object store that
    is all that is fetched, and the driver never holds a whole file's text column.
    """
    by_file: dict[int, list[int]] = {}
    for _, i, row in sample:
        by_file.setdefault(i, []).append(row)
    texts: dict[tuple[int, int], str] = {}
    for i, rows in by_file.items():
        rows.sort()
        with open_parquet(files[i]) as pf:
            start = 0
            for rg in range(pf.num_row_groups):
                stop = start + pf.metadata.row_group(rg).num_rows
                wanted = rows[bisect.bisect_left(rows, start) : bisect.bisect_left(rows, stop)]
                if wanted:
                    col = pf.read_row_group(rg, columns=["text"]).column("text")
                    for r, t in zip(wanted, col.take([r - start for r in wanted]).to_pylist(), strict=True):
                        texts[(i, r)] = t[:max_chars] if isinstance(t, str) else ""
                start = stop
    return [texts[(i, r)] for _, i, r in sample]


def train_tokenizer(input_dir: str | Path, output_dir: str | Path, cfg: TokenizerConfig) -> Path | str:
    """Train byte-level BPE on the sample of `input_dir`; write tokenizer.json + tokenizer_meta.json.

    Either may be a local folder or an object-store URI; returns tokenizer.json's local Path or URI.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    if is_remote(output_dir) and not is_object_store(output_dir):
        raise InputError(
            f"--output {output_dir}: http(s) is read-only; name a local folder or an s3:// prefix"
        )
    out = check_folder_path(output_dir, "--output")  # a file, or an unreachable bucket, fails now
    files = doc_parquet_uris(input_dir)  # InputError for nothing to read or a store that does not answer
    for f in files:  # named here: pyarrow's own error for a missing column does not say which file
        names = parquet_schema(f).names
        missing = [c for c in ("id", "text") if c not in names]
        if missing:
            raise InputError(f"{f}: no {' or '.join(map(repr, missing))} column; columns: {', '.join(names)}")
    sample = select_sample(files, cfg)
    if not sample:
        raise InputError(f"{input_dir}: no documents to train a tokenizer on")
    ordered = read_sample_texts(files, sample, cfg.max_chars_per_doc)

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=cfg.vocab_size,
        min_frequency=cfg.min_frequency,
        special_tokens=[cfg.eod_token, *cfg.special_tokens],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(ordered, trainer=trainer, length=len(ordered))

    if isinstance(out, Path):
        out.mkdir(parents=True, exist_ok=True)
    data = tok.to_str(pretty=True).encode()
    tok_path = join(out, "tokenizer.json")
    atomic_write_bytes(tok_path, data)
    meta = {
        "job": "train-tokenizer",
        "config": cfg.to_dict(),
        "config_fingerprint": cfg.fingerprint(),
        "eod_token": cfg.eod_token,
        "eod_id": tok.token_to_id(cfg.eod_token),
        "vocab_size": tok.get_vocab_size(),
        "tokenizer_sha256": hashlib.sha256(data).hexdigest(),
        "sample": {
            "documents": len(ordered),
            "chars": sum(len(t) for t in ordered),
            "input": str(input_dir).rstrip("/")
            if is_object_store(input_dir)
            else str(Path(input_dir).resolve()),
            "input_files": [f.rsplit("/", 1)[-1] for f in files],
        },
    }
    # Last: a reader (load_tokenizer, the demo's resume) takes the meta as "this tokenizer is whole".
    atomic_write_json(join(out, "tokenizer_meta.json"), meta)
    return tok_path if is_object_store(tok_path) else Path(tok_path)


def read_tokenizer_file(path: str | Path) -> tuple[str, bytes]:
    """(absolute path or URI, bytes) of tokenizer.json: `path` itself, or `path`/tokenizer.json."""
    store = open_store(path)
    where = str(path).rstrip("/") if is_object_store(path) else str(Path(path).expanduser().resolve())
    for candidate in (where, join(where, "tokenizer.json")):
        try:
            return candidate, store.read_bytes(candidate)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            continue
        except OSError as e:  # a store that does not answer, a file we may not read
            raise InputError(f"cannot read tokenizer {candidate}: {e}") from None
    raise InputError(f"tokenizer file not found: {where}")


def read_tokenizer_meta(tokenizer_path: str) -> dict[str, Any]:
    """tokenizer_meta.json beside a tokenizer.json (local or URI); {} when there is none.

    A tokenizer folder is a model folder someone hands us: its JSON goes through the checked reader
    (core/safe_json.py), so a deep, non-finite or non-object file is an InputError naming it, not a
    RecursionError or AttributeError traceback."""
    meta_path = join(tokenizer_path.rsplit("/", 1)[0], "tokenizer_meta.json")
    try:
        raw = open_store(meta_path).read_bytes(meta_path)
    except FileNotFoundError:
        return {}
    meta = loads_checked(raw, meta_path)
    if not isinstance(meta, dict):
        raise JSONFileError(f"{meta_path}: not a JSON object (train-tokenizer writes one)")
    return meta


def load_tokenizer(path: str | Path, eod_token: str | None = None) -> LoadedTokenizer:
    """Load tokenizer.json (local or on a store); find its EOD token (argument, then
    tokenizer_meta.json, then known names)."""
    from tokenizers import Tokenizer

    where, data = read_tokenizer_file(path)
    try:
        text = data.decode("utf-8")
        tok = Tokenizer.from_str(text)
    except Exception as e:  # the Rust side raises a bare Exception for malformed JSON
        raise InputError(f"{where}: not a Hugging Face tokenizer.json: {e}") from None
    meta = read_tokenizer_meta(where)
    name = eod_token or meta.get("eod_token")
    if name is None:
        name = next((t for t in KNOWN_EOD_TOKENS if tok.token_to_id(t) is not None), None)
    if name is None or tok.token_to_id(name) is None:
        raise InputError(
            f"{where}: end-of-document token {name!r} is not in the vocabulary; pass --eod-token "
            f"(known names tried: {', '.join(KNOWN_EOD_TOKENS)})"
        )
    # A document that literally contains the EOD string must not get a real EOD in the middle:
    # special tokens in document text are encoded as plain text.
    tok.encode_special_tokens = True
    return LoadedTokenizer(
        tokenizer=tok,
        eod_token=name,
        eod_id=tok.token_to_id(name),
        vocab_size=tok.get_vocab_size(),
        sha256=hashlib.sha256(data).hexdigest(),
        path=where,
        tokenizer_json=text,
        meta=meta,
    )


# -- fast encoding ------------------------------------------------------------------------------

ENCODERS = ("auto", "tiktoken", "hf")
"""`auto`: tiktoken when exact for the tokenizer.json, else HF; `tiktoken`: that or an error; `hf`: HF."""

# tiktoken's r50k/GPT-2 pattern: HF ByteLevel's `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+|
# ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+` rewritten with possessive quantifiers (same matches, faster). Both
# engines (HF's Oniguruma, tiktoken's fancy-regex) gave identical ids for every code point in
# letter/number/space contexts (checked once over all 1.1M; the test checks a sample of every block).
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""

# Strings where a regex or merge-order difference would show; checked at build time as a guard
# against a future `tokenizers`/`tiktoken` changing behaviour (the tests cover real data).
PROBE_TEXTS = (
    "Hello, world! It's 2024: don't we'll they've I'm you'd 3.14159 1,000,000",
    "Windows line\r\nends\tand\ttabs   \n\n\n  trailing   ",
    "emoji \U0001f600\U0001f44d\U0001f3fd\u200d\U0001f9d1 flags \U0001f1fa\U0001f1f8 keycap 1\ufe0f\u20e3",
    "combining e\u0301 n\u0303 \u0915\u094d\u0937 \u00a0nbsp\u2003em\u3000ideographic\u0085nel",
    "数据 данные データ 데이터 البيانات δεδομένα डेटा <|endoftext|> <|pad|> \x00 \ufeff",
    " " * 40 + "x" + "\t" * 9 + "\n",
)


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character map, which ByteLevel vocabularies are written in."""
    bs = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    cs = list(bs)
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs), strict=True))


def _tiktoken_encoding(spec: dict[str, Any], hf: Any) -> tuple[Any | None, str]:
    """(tiktoken.Encoding, "") giving exactly `hf`'s ids on any text, or (None, why it would not)."""
    pre = spec.get("pre_tokenizer") or {}
    model = spec.get("model") or {}
    post = (spec.get("post_processor") or {}).get("type")
    checks = [
        (spec.get("normalizer") is None, f"normalizer {spec.get('normalizer')!r}"),
        (
            pre.get("type") == "ByteLevel" and pre.get("use_regex", True),
            f"pre-tokenizer {pre.get('type')!r} (only ByteLevel with its GPT-2 regex)",
        ),
        (not pre.get("add_prefix_space", False), "ByteLevel add_prefix_space=true"),
        (model.get("type") == "BPE", f"model {model.get('type')!r}"),
        (model.get("dropout") in (None, 0.0), "BPE dropout (random merges)"),
        (
            not model.get("continuing_subword_prefix") and not model.get("end_of_word_suffix"),
            "BPE subword prefix/suffix",
        ),
        (post in (None, "ByteLevel"), f"post-processor {post!r}"),
        (spec.get("truncation") is None and spec.get("padding") is None, "truncation/padding set"),
    ]
    nonspecial = [t["content"] for t in spec.get("added_tokens", []) if not t.get("special")]
    # encode_special_tokens=True keeps special tokens out of document text; non-special added
    # tokens are still cut out of the text by HF, which tiktoken's ordinary encoding cannot do.
    checks.append((not nonspecial, f"non-special added tokens {nonspecial[:3]}"))
    for ok, why in checks:
        if not ok:
            return None, f"not expressible in tiktoken: {why}"
    try:
        import tiktoken
    except ImportError:
        return None, "tiktoken is not installed (pip install tiktoken)"

    vocab: dict[str, int] = model["vocab"]
    merges = [m.split(" ", 1) if isinstance(m, str) else m for m in model.get("merges", [])]
    results = [vocab.get(a + b) for a, b in merges]
    # HF applies the earliest merge first, tiktoken the pair whose result has the smallest id.
    if None in results:
        return None, f"merge {merges[results.index(None)]} makes a token that is not in the vocabulary"
    if any(x >= y for x, y in itertools.pairwise(results)):
        return None, "merge order is not id order (tiktoken ranks merges by result id)"
    u2b = {c: b for b, c in bytes_to_unicode().items()}
    added = {t["id"] for t in spec.get("added_tokens", [])}
    ranks: dict[bytes, int] = {}
    for tok, i in vocab.items():
        if i in added:
            continue  # special: never produced from text (encode_special_tokens)
        if any(c not in u2b for c in tok):
            return None, f"vocabulary token {tok!r} is not byte-level"
        # tiktoken encodes a piece that is a whole token as that token; HF's merges must agree.
        got = [t.id for t in hf.model.tokenize(tok)]
        if got != [i]:
            return None, f"token {tok!r} ({i}) is not what HF's merges give for its bytes ({got[:4]})"
        ranks[bytes(u2b[c] for c in tok)] = i
    if missing := [b for b in range(256) if bytes([b]) not in ranks]:
        return None, f"{len(missing)} of the 256 byte tokens are missing"
    enc = tiktoken.Encoding("refinery", pat_str=GPT2_PATTERN, mergeable_ranks=ranks, special_tokens={})
    for text in PROBE_TEXTS:
        if enc.encode_ordinary(text) != hf.encode(text, add_special_tokens=False).ids:
            return None, f"probe text encodes differently: {text[:40]!r}"
    return enc, ""


@dataclass(frozen=True, slots=True)
class DocumentEncoder:
    """Document texts -> token ids (no EOD), with tiktoken or HF; `hf` is always there for lookups."""

    backend: str
    """"tiktoken" or "hf"."""
    reason: str
    """Why HF is used ("" with tiktoken)."""
    hf: Any
    tt: Any = None

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        if self.tt is not None:
            # One thread: Spark already runs one task per core.
            return [self.tt.encode_ordinary(t) for t in texts]
        return [e.ids for e in self.hf.encode_batch_fast(texts, add_special_tokens=False)]


MAX_TOKENIZER_JSON_BYTES = 1 << 30
"""Largest tokenizer.json parsed here (a 256K vocabulary with its merges is ~30 MB)."""


def build_encoder(tokenizer_json: str, mode: str = "auto") -> DocumentEncoder:
    """The fastest exact encoder for this tokenizer.json (see the module docstring)."""
    from tokenizers import Tokenizer

    if mode not in ENCODERS:
        raise ValueError(f"encoder must be one of {', '.join(ENCODERS)}, got {mode!r}")
    hf = Tokenizer.from_str(tokenizer_json)
    # Literal special-token strings inside documents are text, not control tokens.
    hf.encode_special_tokens = True
    if mode == "hf":
        return DocumentEncoder("hf", "encoder=hf requested", hf)
    # the checked reader: tokenizer.json is the user's file (it parsed in `tokenizers` already: this
    # only keeps a hostile one from a traceback here); a large vocabulary is tens of MB
    spec = loads_checked(tokenizer_json, "tokenizer.json", max_bytes=MAX_TOKENIZER_JSON_BYTES)
    tt, reason = _tiktoken_encoding(spec, hf)
    if tt is None:
        if mode == "tiktoken":
            raise ValueError(f"encoder=tiktoken: {reason}")
        log.warning("tokenize: using the Hugging Face encoder (slower): %s", reason)
        return DocumentEncoder("hf", reason, hf)
    return DocumentEncoder("tiktoken", "", hf, tt)
