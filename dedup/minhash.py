"""MinHash signatures and LSH band keys, vectorised with numpy (no per-shingle Python loop).

A shingle is `ngram` consecutive tokens of the normalized text (see dedup.normalize: words, or single
characters of scripts written without spaces). Because normalized text has exactly one space between
tokens, a shingle is a byte range of the UTF-8 text, so every shingle's 64-bit hash comes from one
prefix-sum pass over the bytes: a polynomial hash mod 2^64 of the range (prefix sums and inverse
powers, all numpy), finished with murmur3's fmix64 so the bits are well mixed. `hash_strings` gives
the same hash for a shingle string, which is what tests and exact-Jaccard checks use.

dedup.kernels computes the same values bit for bit with numba, a batch of documents per call and
several times faster; `MinHasher.sign_batch` and `band_keys_batch` use it, and the numpy functions
here are the reference it is tested against.

Permutation i maps a shingle hash h to the top 32 bits of (a_i*h + b_i) mod 2^64 (multiply-add-shift
universal hashing, Dietzfelbinger 1996) with a_i odd; the signature is the minimum per permutation,
uint32. Bands of `rows` values are hashed (again vectorised over bands) to int64 LSH keys.

`optimal_bands` picks bands x rows for a Jaccard threshold by minimising the weighted false-positive
and false-negative areas under the LSH S-curve, as datasketch's `MinHashLSH` does.

Per language (`minhash.per_language`, FineWeb-2 dedups each language alone): `language_hashes` gives
each document a 64-bit hash of its language group, the ISO 639-3 language of its `lang` as
core.languages reads any form of it, hashed with `hash_strings` (fixed and unseeded, unlike Python's
hash()), and every band key becomes fmix64(key XOR that hash): equal keys need equal groups, so two
languages never share a bucket.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import model_validator

from core.config import ConfigError, ConfigModel, check_choice
from core.languages import LanguageCodeError, split_code
from dedup import kernels
from dedup.words import WORDS

_MASK64 = (1 << 64) - 1
# One set of constants for the reference and the compiled kernels (defined there: numba needs them
# as module globals of the kernel's own module).
_POLY_BASE = int(kernels.POLY_BASE)
_POLY_BASE_INV = int(kernels.POLY_BASE_INV)
_FMIX_C1 = kernels.FMIX_C1
_FMIX_C2 = kernels.FMIX_C2
# Signature chunking: at most this many shingles x permutations uint64 values in memory at once.
_CHUNK_VALUES = 1 << 19
HASHES = ("poly64",)
VERIFY = ("none", "signature", "exact")


class MinHashConfig(ConfigModel):
    """Everything that changes signatures, bands or edges. Its str() names the stage folders."""

    ngram: int = 5
    num_perm: int = 128
    threshold: float = 0.8
    bands: int | None = None
    """bands and rows: both given, or both derived from lsh_threshold"""
    rows: int | None = None
    lsh_threshold: float | None = None
    """The threshold the band S-curve is tuned for (default: `threshold`). With `verify` on, a lower
    value finds more candidate pairs (recall) and verification removes the false ones (precision)."""
    false_positive_weight: float = 0.5
    false_negative_weight: float = 0.5
    seed: int = 42
    hash: str = "poly64"
    verify: str = "none"
    """Candidate pairs from band collisions are kept as edges as they are ("none"), or only when the
    signature estimate ("signature") or the exact shingle Jaccard ("exact") reaches the threshold."""
    words: str = "normalized"
    """What a shingle's tokens are (dedup.words): "normalized" text (one token per letter of scripts
    without spaces), or "language": FineWeb-2's words of the document's `lang` segmenter for
    scripts without spaces (Chinese, Japanese, Thai, Khmer, Lao, Myanmar, Tibetan), normalized
    text for the rest"""
    per_language: bool = False
    """Band keys are mixed with the document's `lang` (`language_hashes`), so only documents of the
    same language can collide: FineWeb-2's per-language runs, without splitting the data. `lang` is
    compared as its ISO 639-3 language (`language_group`: `en` and `eng_Latn` are one); macrolanguage
    members stay apart (`cmn_Hani`, `yue_Hani`), as FineWeb-2's subsets are; a row with no `lang` is
    in the group "no language". The input must have a `lang` column (checked before Spark starts)."""

    @model_validator(mode="after")
    def _check(self) -> MinHashConfig:
        if self.ngram < 1:
            raise ConfigError(f"minhash.ngram must be >= 1, got {self.ngram}")
        if not 1 <= self.num_perm <= 1024:
            raise ConfigError(f"minhash.num_perm must be in 1..1024, got {self.num_perm}")
        if not 0.0 < self.threshold < 1.0:
            raise ConfigError(f"minhash.threshold must be in (0, 1), got {self.threshold}")
        if self.lsh_threshold is not None and not 0.0 < self.lsh_threshold < 1.0:
            raise ConfigError(f"minhash.lsh_threshold must be in (0, 1), got {self.lsh_threshold}")
        if (self.bands is None) != (self.rows is None):
            raise ConfigError("minhash.bands and minhash.rows must be given together (or neither)")
        if self.bands is not None:
            if self.bands < 1 or self.rows < 1:
                raise ConfigError("minhash.bands and minhash.rows must be >= 1")
            if self.bands * self.rows > self.num_perm:
                raise ConfigError(
                    f"minhash.bands x rows = {self.bands * self.rows} exceeds num_perm = {self.num_perm}"
                )
        check_choice("minhash.hash", self.hash, HASHES)
        check_choice("minhash.verify", self.verify, VERIFY)
        check_choice("minhash.words", self.words, WORDS)
        return self

    @property
    def band_rows(self) -> tuple[int, int]:
        if self.bands is not None:
            return self.bands, self.rows
        return optimal_bands(
            self.lsh_threshold or self.threshold,
            self.num_perm,
            self.false_positive_weight,
            self.false_negative_weight,
        )

    def __str__(self) -> str:
        b, r = self.band_rows
        name = f"{self.ngram}ng_{self.num_perm}p_{b}x{r}_t{self.threshold:g}_s{self.seed}_{self.hash}_v{self.verify}"
        # the defaults are left out, so every folder made before the keys existed keeps its name
        if self.words != "normalized":
            name += f"_w{self.words}"
        return f"{name}_plang" if self.per_language else name

    def to_dict(self) -> dict[str, Any]:
        """The fields with bands and rows resolved (what `_config.json` records)."""
        d = super().to_dict()
        d["bands"], d["rows"] = self.band_rows
        if self.words == "normalized":
            del d["words"]  # the default: configs recorded before the key existed keep their fingerprint
        if not self.per_language:
            del d["per_language"]  # likewise
        return d


def _collision_probability(s: np.ndarray, b: int, r: int) -> np.ndarray:
    return 1.0 - (1.0 - s**r) ** b


@functools.cache
def optimal_bands(
    threshold: float, num_perm: int, fp_weight: float = 0.5, fn_weight: float = 0.5
) -> tuple[int, int]:
    """(bands, rows) with bands*rows <= num_perm minimising fp_weight*FP area + fn_weight*FN area.

    FP area = integral over s in [0, t] of P(candidate | s); FN area = integral over [t, 1] of
    1 - P(candidate | s). Integrated with the trapezoid rule on 2,001 points per side (datasketch
    uses scipy's quad; the grid is fine enough that the argmin is the same, which a test checks).
    """
    lo = np.linspace(0.0, threshold, 2001)
    hi = np.linspace(threshold, 1.0, 2001)
    best, best_err = (1, 1), float("inf")
    for b in range(1, num_perm + 1):
        for r in range(1, num_perm // b + 1):
            fp = np.trapezoid(_collision_probability(lo, b, r), lo)
            fn = np.trapezoid(1.0 - _collision_probability(hi, b, r), hi)
            err = fp_weight * fp + fn_weight * fn
            if err < best_err:
                best, best_err = (b, r), err
    return best


def _fmix64(h: np.ndarray) -> np.ndarray:
    h = h ^ (h >> np.uint64(33))
    h = h * _FMIX_C1
    h = h ^ (h >> np.uint64(33))
    h = h * _FMIX_C2
    return h ^ (h >> np.uint64(33))


def _powers(base: int, n: int) -> np.ndarray:
    """base^0 .. base^(n-1) mod 2^64 (numpy's uint64 products wrap, which is the modulus we want)."""
    out = np.full(n, base, dtype=np.uint64)
    out[0] = 1
    return np.cumprod(out, dtype=np.uint64)


def _range_hashes(data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Hash of data[s:e] for every (s, e): polynomial mod 2^64, then fmix64, plus the length."""
    n = len(data)
    pw = _powers(_POLY_BASE, n)
    inv = _powers(_POLY_BASE_INV, n + 1)
    prefix = np.zeros(n + 1, dtype=np.uint64)
    np.cumsum(data.astype(np.uint64) * pw, out=prefix[1:])
    # sum_{j in [s, e)} data[j] * B^(j - s)  ==  (prefix[e] - prefix[s]) * B^(-s)   (mod 2^64)
    raw = (prefix[ends] - prefix[starts]) * inv[starts]
    # The length is mixed in so ranges that differ only by trailing zero bytes cannot collide.
    return _fmix64(raw ^ (ends - starts).astype(np.uint64) * _FMIX_C2)


def token_bounds(norm_text: str | bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(utf8 bytes, token starts, token ends) of normalized text (tokens separated by one space)."""
    raw = norm_text if isinstance(norm_text, bytes) else norm_text.encode("utf-8", "surrogatepass")
    data = np.frombuffer(raw, dtype=np.uint8)
    if data.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return data, empty, empty
    spaces = np.flatnonzero(data == 32)
    starts = np.concatenate(([0], spaces + 1))
    ends = np.concatenate((spaces, [data.size]))
    return data, starts, ends


def shingle_hashes(norm_text: str | bytes, ngram: int) -> np.ndarray:
    """uint64 hash of every `ngram`-token shingle of normalized text (empty if fewer tokens)."""
    data, starts, ends = token_bounds(norm_text)
    k = starts.size - ngram + 1
    if k <= 0:
        return np.zeros(0, dtype=np.uint64)
    return _range_hashes(data, starts[:k], ends[ngram - 1 :])


def shingle_strings(norm_text: str, ngram: int) -> list[str]:
    """The shingles as strings (for tests and reference implementations; not on the hot path)."""
    toks = norm_text.split(" ") if norm_text else []
    return [" ".join(toks[i : i + ngram]) for i in range(len(toks) - ngram + 1)]


def hash_strings(strings: list[str]) -> np.ndarray:
    """The same 64-bit hash as `shingle_hashes` gives, for each given string."""
    if not strings:
        return np.zeros(0, dtype=np.uint64)
    encoded = [s.encode("utf-8", "surrogatepass") for s in strings]
    lengths = np.array([len(e) for e in encoded], dtype=np.int64)
    ends = np.cumsum(lengths)
    starts = ends - lengths
    return _range_hashes(np.frombuffer(b"".join(encoded), dtype=np.uint8), starts, ends)


class MinHasher:
    """Signatures and band keys for one MinHashConfig (permutation parameters drawn from the seed)."""

    def __init__(self, config: MinHashConfig) -> None:
        self.config = config
        self.bands, self.rows = config.band_rows
        rng = np.random.default_rng(config.seed)
        self.a = rng.integers(0, 1 << 63, size=config.num_perm, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
        self.b = rng.integers(0, 1 << 63, size=config.num_perm, dtype=np.uint64) * np.uint64(2)
        band_seeds = rng.integers(0, 1 << 63, size=self.bands, dtype=np.uint64)
        self._band_seeds = _fmix64(band_seeds)

    def signature(self, hashes: np.ndarray) -> np.ndarray:
        """uint32[num_perm] minimum over shingles of each permutation (all 0xFFFFFFFF if no shingle)."""
        p = self.config.num_perm
        best = np.full(p, np.iinfo(np.uint64).max, dtype=np.uint64)
        step = max(1, _CHUNK_VALUES // p)
        buf = np.empty((min(step, hashes.size), p), dtype=np.uint64)
        for i in range(0, hashes.size, step):
            h = hashes[i : i + step, None]
            out = buf[: h.shape[0]]
            np.multiply(h, self.a[None, :], out=out)
            np.add(out, self.b[None, :], out=out)
            np.minimum(best, out.min(axis=0), out=best)
        # x -> x >> 32 is monotonic, so the shift commutes with the minimum: shift once, at the end.
        return (best >> np.uint64(32)).astype(np.uint32)

    def text_signature(self, norm_text: str | bytes) -> np.ndarray | None:
        """Signature of normalized text, or None when it has fewer tokens than one shingle."""
        raw = norm_text if isinstance(norm_text, bytes) else norm_text.encode("utf-8", "surrogatepass")
        sigs, n_shingles = self.sign_batch([raw])
        return sigs[0] if n_shingles[0] else None

    def sign_batch(self, norm_texts: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
        """(uint32[n, num_perm] signatures, int64[n] shingle counts) of normalized UTF-8 texts, compiled.

        A text with no shingle gets a count of 0 and an all-0xFFFFFFFF row, as `signature` gives.
        """
        n = len(norm_texts)
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, norm_texts), dtype=np.int64, count=n), out=offsets[1:])
        data = np.frombuffer(b"".join(norm_texts), dtype=np.uint8)
        sigs = np.empty((n, self.config.num_perm), dtype=np.uint32)
        n_shingles = np.empty(n, dtype=np.int64)
        kernels.sign_batch(data, offsets, self.config.ngram, self.a, self.b, sigs, n_shingles)
        return sigs, n_shingles

    def band_keys_batch(self, sigs: np.ndarray, groups: np.ndarray | None = None) -> np.ndarray:
        """int64[n, bands]: `band_keys` of every row of a signature matrix, compiled; with `groups`
        (uint64[n], `language_hashes`), each row's keys mixed with its group's hash."""
        out = np.empty((sigs.shape[0], self.bands), dtype=np.uint64)
        kernels.band_keys_batch(np.ascontiguousarray(sigs), self.bands, self.rows, self._band_seeds, out)
        if groups is not None:
            out = _fmix64(out ^ groups.astype(np.uint64)[:, None])  # (n, bands)
        return out.view(np.int64)

    def band_keys(self, sig: np.ndarray) -> np.ndarray:
        """int64[bands]: hash of each band's `rows` values (band index mixed in via its seed)."""
        used = sig[: self.bands * self.rows].astype(np.uint64).reshape(self.bands, self.rows)
        h = self._band_seeds.copy()
        for j in range(self.rows):
            h = _fmix64(h ^ used[:, j] ^ (h << np.uint64(7)))
        return h.view(np.int64)


NO_LANGUAGE = np.uint64(0)
"""The group hash of a row whose `lang` is null or empty: one group, "no language"."""


@functools.lru_cache(maxsize=4096)  # bounded: a hostile column cannot grow it
def language_group(code: str) -> str:
    """The language group of a non-empty `lang` value: its ISO 639-3 language (core.languages.split_code).

    So every form of one language is one group: canonical `eng_Latn`, older outputs' lid.176 `en`,
    `eng`. The script is left out: it is what the letters are, so two near-duplicate texts have the
    same one, and a label that differs only there is noise (reading it off the text for `en`, as
    core.languages.text_script does, measured 140-200 us per Russian or Chinese document of 900
    characters: about 15x signing it). Macrolanguage members stay apart (`cmn`, `yue`: two
    FineWeb-2 subsets), and a macrolanguage code (`zho`) is not guessed into a member: it is a
    group of its own. An unreadable value is a group of its own, by its exact string
    ("?" + value: no ISO 639-3 code starts with "?"), as a run over that label alone would be.
    """
    try:
        return split_code(code)[0]
    except LanguageCodeError:
        return f"?{code}"


def language_hashes(langs: pa.Array | pa.ChunkedArray | list[str | None]) -> np.ndarray:
    """uint64[n]: `hash_strings` of each document's `language_group` (NO_LANGUAGE: null or empty).

    Per batch: the distinct `lang` values (a batch holds a few) are grouped and hashed once
    (pyarrow's dictionary encoding), and their hashes gathered back to the rows with numpy.
    """
    if isinstance(langs, pa.ChunkedArray):
        langs = langs.combine_chunks()
    arr = langs if isinstance(langs, pa.Array) else pa.array(langs, pa.string())
    if len(arr) == 0 or pa.types.is_null(arr.type):
        return np.full(len(arr), NO_LANGUAGE, dtype=np.uint64)
    enc = arr if pa.types.is_dictionary(arr.type) else pc.dictionary_encode(arr)
    values = enc.dictionary.to_pylist()
    named = [i for i, v in enumerate(values) if v]
    table = np.full(len(values) + 1, NO_LANGUAGE, dtype=np.uint64)  # the last slot: null (index -1)
    table[named] = hash_strings([language_group(values[i]) for i in named])
    return table[pc.fill_null(enc.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)]


def estimate_jaccard(sig_a: np.ndarray, sig_b: np.ndarray) -> float:
    """Fraction of permutations whose minima agree: the unbiased MinHash Jaccard estimate."""
    return float(np.mean(sig_a == sig_b))


def exact_jaccard(hashes_a: np.ndarray, hashes_b: np.ndarray) -> float:
    """Jaccard similarity of two shingle-hash sets (1.0 for two empty sets)."""
    a, b = np.unique(hashes_a), np.unique(hashes_b)
    union = np.union1d(a, b).size
    return 1.0 if union == 0 else np.intersect1d(a, b, assume_unique=True).size / union
