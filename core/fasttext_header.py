"""Check a fastText model file (`.bin` or quantised `.ftz`) in pure Python before fastText reads it.

`fasttext.load_model` trusts its file (fastText 0.9.x, src/fasttext.cc `loadModel`, args.cc,
dictionary.cc, densematrix.cc, quantmatrix.cc, productquantizer.cc): sizes are read as raw integers
and used to allocate and index, so a crafted header can kill the process (a `bucket` of 0 with
character n-grams divides by zero: SIGFPE), make it allocate what the file never holds (negative
or huge matrix dimensions: MemoryError after seconds), or spin forever (a dictionary word is read
byte by byte until a NUL, which a truncated file never gives). None of that can be caught in Python.

`check_fasttext_file` walks the whole layout fastText's loader reads, without loading the matrices:

    int32 magic (793712314), int32 version (11 or 12)
    args: 12 x int32 (dim ws epoch minCount neg wordNgrams loss model bucket minn maxn lrUpdateRate), float64 t
    dictionary: int32 size nwords nlabels, int64 ntokens pruneidx_size (-1: not pruned),
                size x (NUL-terminated word, int64 count, int8 type), pruneidx_size x (int32, int32)
    bool quant_input, input matrix, bool qout, output matrix
    dense matrix: int64 m n, m*n float32
    quantised matrix: bool qnorm, int64 m n, int32 codesize, codesize bytes, product quantiser,
                      [qnorm: m bytes of norm codes, product quantiser]
    product quantiser: int32 dim nsubq dsub lastdsub, dim*256 float32

and refuses (FastTextFileError, naming the file and the field) anything that is not what fastText
writes: a wrong magic or version, an option out of its range, a count that disagrees with the
dictionary, matrix dimensions that do not match `dim` and the dictionary, or sizes that do not add
up to exactly the file's length. Every size fastText will allocate is then bounded by the file size.

Two things fastText loads without a word but fails on later, far from the file: a weight that is NaN
or infinite (every float32 of the matrices and quantiser centroids is checked: `predict` raises
"Encountered NaN" on the first text that touches it, inside a Spark task), and a label that is not
UTF-8 (fastText's Python binding decodes labels on every prediction). The labels are returned, so a
caller can check them against its own scheme without loading the model.
"""

from __future__ import annotations

import mmap
import struct
from pathlib import Path
from typing import Any

from core.errors import InputError

MAGIC = 793712314  # FASTTEXT_FILEFORMAT_MAGIC_INT32
VERSIONS = (11, 12)  # FASTTEXT_VERSION is 12; 11 files are still read (without char n-grams)
LOSSES = {1: "hs", 2: "ns", 3: "softmax", 4: "ova"}
MODELS = {1: "cbow", 2: "sg", 3: "sup"}
KSUB = 256  # centroids per sub-quantiser (nbits = 8)
MAX_DIM = 1 << 16  # word vectors of fastText are 10..1000 wide; anything this wide is not a model
MAX_NGRAM = 64  # wordNgrams, minn, maxn: real models use <= 6
_ARGS = struct.Struct("<12id")
_DICT = struct.Struct("<iiiqq")


class FastTextFileError(InputError):
    """The file is not a fastText model fastText can load safely; the message names the file and why."""


class _Reader:
    """Bounded reads over the file's bytes; running past the end is a FastTextFileError."""

    def __init__(self, path: Path, data) -> None:
        self.path, self.data, self.pos = path, data, 0

    def fail(self, why: str) -> FastTextFileError:
        return FastTextFileError(f"{self.path}: not a fastText model fastText can load: {why}")

    def take(self, n: int, what: str) -> int:
        """Skip n bytes; the offset they start at."""
        if n < 0 or self.pos + n > len(self.data):
            raise self.fail(f"the file ends inside {what} (truncated, or a size field is wrong)")
        start, self.pos = self.pos, self.pos + n
        return start

    def unpack(self, st: struct.Struct, what: str) -> tuple:
        return st.unpack_from(self.data, self.take(st.size, what))

    def byte(self, what: str) -> int:
        return self.data[self.take(1, what)]


def _bool(r: _Reader, what: str) -> bool:
    v = r.byte(what)
    if v not in (0, 1):
        raise r.fail(f"{what} is {v}, not a bool")
    return bool(v)


FINITE_CHUNK = 1 << 22  # float32s checked at a time: 16 MiB of flags at most, whatever the matrix


def _finite(r: _Reader, start: int, count: int, what: str) -> None:
    """Refuse NaN or infinite float32s among `count` at byte `start` (read in place from the mmap)."""
    import numpy as np

    bad = -1
    for lo in range(0, count, FINITE_CHUNK):
        chunk = np.frombuffer(r.data, dtype="<f4", count=min(FINITE_CHUNK, count - lo), offset=start + 4 * lo)
        ok = np.isfinite(chunk)
        if not ok.all():
            bad = lo + int(np.argmin(ok))
        del chunk, ok  # no view of the mmap may outlive this frame: it is closed after the walk
        if bad >= 0:
            raise FastTextFileError(
                f"{r.path}: {what} has a NaN or infinite weight (float {bad:,} of {count:,}): fastText "
                "loads it, and every prediction that reads it fails"
            )


def _product_quantizer(r: _Reader, dim: int, what: str) -> None:
    pq_dim, nsubq, dsub, lastdsub = r.unpack(struct.Struct("<4i"), what)
    if pq_dim != dim or not 1 <= dsub <= dim:
        raise r.fail(f"{what}: dim {pq_dim}, dsub {dsub} for vectors of {dim}")
    # ProductQuantizer(dim, dsub): nsubq = ceil(dim / dsub), the last sub-vector takes the rest
    want = (dim // dsub + (dim % dsub > 0), dim % dsub or dsub)
    if (nsubq, lastdsub) != want:
        raise r.fail(f"{what}: nsubq {nsubq}, lastdsub {lastdsub}; dim {dim} / dsub {dsub} gives {want}")
    _finite(r, r.take(4 * dim * KSUB, f"{what} centroids"), dim * KSUB, f"{what} centroids")


def _matrix(r: _Reader, quantised: bool, rows: int, dim: int, what: str) -> None:
    if not quantised:
        m, n = r.unpack(struct.Struct("<qq"), f"{what} header")
        if (m, n) != (rows, dim):
            raise r.fail(f"{what} is {m} x {n}, the header and dictionary say {rows} x {dim}")
        _finite(r, r.take(4 * m * n, f"{what} ({m} x {n} float32)"), m * n, what)
        return
    qnorm = _bool(r, f"{what} qnorm")
    m, n, codesize = r.unpack(struct.Struct("<qqi"), f"{what} header")
    if (m, n) != (rows, dim):
        raise r.fail(f"{what} is {m} x {n}, the header and dictionary say {rows} x {dim}")
    r.take(codesize, f"{what} codes")
    # peek at dsub to check codesize = m * nsubq before reading the quantiser
    if r.pos + 12 > len(r.data):
        raise r.fail(f"the file ends inside {what} quantiser")
    _pq_dim, nsubq = struct.unpack_from("<ii", r.data, r.pos)
    if codesize != m * nsubq:
        raise r.fail(f"{what}: {codesize} codes for {m} rows of {nsubq} sub-vectors")
    _product_quantizer(r, n, f"{what} quantiser")
    if qnorm:
        r.take(m, f"{what} norm codes")
        _product_quantizer(r, 1, f"{what} norm quantiser")


def check_fasttext_file(path: str | Path) -> dict[str, Any]:
    """Refuse (FastTextFileError) a file fastText's loader would crash, hang or over-allocate on, or
    whose weights or labels it would fail on later; return the header's fields (dim, model, loss,
    nwords, nlabels, bucket, quantised...) and `labels` (the dictionary's labels, as written:
    `__label__en`)."""
    p = Path(path)
    try:
        f = open(p, "rb")  # noqa: SIM115 - the mmap below needs the descriptor
    except OSError as e:
        raise FastTextFileError(f"{p}: cannot read the fastText model: {e.strerror or e}") from None
    with f:
        size = p.stat().st_size if p.is_file() else 0
        if size < 8:
            raise FastTextFileError(f"{p}: not a fastText model ({size} bytes)")
        # mmap: the dictionary is walked in place; the matrices (most of a .bin) are never read
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return _check(_Reader(p, data))


def _check(r: _Reader) -> dict[str, Any]:
    magic, version = r.unpack(struct.Struct("<ii"), "the magic number")
    if magic != MAGIC:
        raise r.fail(f"magic number {magic}, not fastText's {MAGIC}")
    if version not in VERSIONS:
        raise r.fail(f"format version {version} (fastText reads {VERSIONS[0]}..{VERSIONS[-1]})")
    (dim, _ws, _epoch, _min_count, _neg, word_ngrams, loss, model, bucket, minn, maxn, _lr_rate, _t) = (
        r.unpack(_ARGS, "the training arguments")
    )
    if version == 11 and model == 3:
        maxn = 0  # fastText's own rule for old supervised files: no character n-grams
    if not 1 <= dim <= MAX_DIM:
        raise r.fail(f"dim {dim} (1..{MAX_DIM})")
    if loss not in LOSSES or model not in MODELS:
        raise r.fail(f"loss {loss} / model {model} (loss 1..4, model 1..3)")
    for name, v, low in (("wordNgrams", word_ngrams, 1), ("minn", minn, 0), ("maxn", maxn, 0)):
        if not low <= v <= MAX_NGRAM:
            raise r.fail(f"{name} {v} ({low}..{MAX_NGRAM})")
    if bucket < 0 or (bucket == 0 and (maxn > 0 or word_ngrams > 1)):
        # n-gram ids are hash % bucket: a 0 bucket with n-grams divides by zero (SIGFPE)
        raise r.fail(f"bucket {bucket} with wordNgrams {word_ngrams}, maxn {maxn}")

    size, nwords, nlabels, _ntokens, prune_size = r.unpack(_DICT, "the dictionary header")
    if nwords < 0 or nlabels < 0 or size != nwords + nlabels:
        raise r.fail(f"dictionary of {size} entries with {nwords} words and {nlabels} labels")
    if prune_size < -1:
        raise r.fail(f"pruned index of {prune_size} entries")
    if model == 3 and nlabels < 1:
        raise r.fail("a supervised model without labels")
    entry = struct.Struct("<qb")
    data = r.data
    labels = []
    for i in range(size):
        end = data.find(b"\0", r.pos)
        if end < 0:
            raise r.fail(f"the file ends inside dictionary entry {i} of {size}")
        if i >= nwords:
            try:
                labels.append(data[r.pos : end].decode("utf-8"))
            except UnicodeDecodeError:
                raise r.fail(f"dictionary entry {i} (label {i - nwords}) is not UTF-8") from None
        r.pos = end + 1
        count, kind = r.unpack(entry, f"dictionary entry {i}")
        if kind not in (0, 1) or count < 0 or (kind == 1) != (i >= nwords):
            # Dictionary keeps words first, then labels (entry_type word = 0, label = 1)
            raise r.fail(f"dictionary entry {i}: type {kind}, count {count}")
    pruned = prune_size >= 0
    rows = nwords + (prune_size if pruned else bucket)
    if prune_size > 0:
        start = r.take(8 * prune_size, "the pruned index")  # bounded by the file before unpacking
        pairs = struct.Struct(f"<{2 * prune_size}i").unpack_from(data, start)
        # an n-gram bucket maps to row nwords + second of the input matrix
        if min(pairs[1::2]) < 0 or max(pairs[1::2]) >= prune_size:
            raise r.fail("the pruned index points outside the input matrix")
    quant_input = _bool(r, "the quantisation flag")
    if pruned and not quant_input:
        raise r.fail("a pruned dictionary with a dense input matrix")
    _matrix(r, quant_input, rows, dim, "the input matrix")
    qout = _bool(r, "the output quantisation flag")
    _matrix(r, quant_input and qout, nlabels if model == 3 else nwords, dim, "the output matrix")
    if r.pos != len(data):
        raise r.fail(f"{len(data) - r.pos} bytes after the output matrix")
    return {
        "version": version,
        "model": MODELS[model],
        "loss": LOSSES[loss],
        "dim": dim,
        "nwords": nwords,
        "nlabels": nlabels,
        "bucket": bucket,
        "quantised": quant_input,
        "labels": tuple(labels),
    }
