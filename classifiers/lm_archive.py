"""Load a `torch.export` archive (an LM's `lm.pt2`) without letting the file run code.

The perplexity scorer runs the reference LM from a `torch.export` program, so that no project model
code (trainer/model.py, a later layer) is needed to run it. But `torch.export.load` trusts its file
(torch 2.13, torch/export/pt2_archive/_package.py and torch/_export/serde/serialize.py):
- weights and constants flagged `use_pickle` are read with `torch.load(weights_only=False)`, "opaque"
  constants with plain `pickle.loads`, and the sample inputs with a `weights_only=False` fallback;
- every symbolic shape expression (`expr_str`) goes through `sympy.sympify`, which evaluates it as
  Python: `__import__('os').system(...)` would run;
- `guards_code` strings are compiled and `exec`-uted by `.module()`;
- a graph node's `target` is resolved by `getattr` from the `torch` module down
  (`torch.serialization.os.system` is reachable) and called when the module runs.

- the call signatures' tree specs (`in_spec`, `out_spec`) are JSON whose contexts may name an enum
  as `{"__enum__": ..., "fqn": "module:Class"}`, which pytree *imports*;
- sympy evaluates what it parses: `Pow(Integer(10), Integer(100000000000))` is a 10^11-digit number
  (the loader hangs), and integers elsewhere size loops and allocations (a range-constraint key
  `u100000000000` counts a shape counter up 10^11 times; a weight record of 0 bytes is
  `torch.zeros(sizes)` of whatever `sizes` says).

So `check_archive` reads the archive as plain data first (zip listing, JSON) and refuses, naming the
file and the reason, anything but what `torch.export.save` writes for a plain tensor program: the
known file names only, JSON members of bounded size, no pickled payloads, no custom or opaque
objects, no guard code, graph targets and operator arguments that are ATen operators or
`operator.getitem`, node metadata of the kinds torch writes as plain strings, tree specs of
tuples/lists/dicts only, and bounds on every number: each JSON integer fits int64; symbol names
are `s123`-like with at most 6 digits; a range constraint is an int64 interval; a weight's sizes,
strides and offset stay inside its record. A symbolic expression (`expr_str`) is parsed here by a
small grammar of sympy constructors (`Mul(Integer(8), Symbol('s27', positive=True, integer=True))`:
calls of allow-listed functions, int64 literals, quoted symbol names, no operators, no dots), at
most MAX_EXPR_CHARS long and MAX_EXPR_DEPTH deep, and an upper bound of the bits of every
subexpression's value (a symbol: 64; Mul: the sum; Pow: base × |exponent|, the exponent an integer
literal) must stay under MAX_EXPR_BITS, so sympy never builds a number it cannot hold.
Only then does `load_program` call `torch.export.load`, with `TORCH_FORCE_WEIGHTS_ONLY_LOAD=1`
(trainer/checkpoint.py's rule) so the one pickle left, the sample inputs, is read weights-only too;
whatever torch still raises on a checked archive is a ModelError naming the file.
tests/classifiers/test_perplexity.py plants code in a real archive and checks that nothing runs;
tests/classifiers/test_hostile_models.py plants sizes, depths and functions that would hang it.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from classifiers.model import ModelError
from core.safe_json import loads_checked
from core.weights_only import weights_only_loads

MODEL = "model"  # the program name torch.export.save gives the one program of an archive

# File names under the archive's root folder, as torch.export.save (torch 2.13) writes them.
_ALLOWED = re.compile(
    r"(archive_format|archive_version|byteorder|\.data/version|\.data/serialization_id"
    rf"|models/{MODEL}\.json|data/sample_inputs/{MODEL}\.pt"
    rf"|data/weights/{MODEL}_weights_config\.json|data/weights/weight_\d+"
    rf"|data/constants/{MODEL}_constants_config\.json|data/constants/tensor_\d+)"
)
# Operators the graph may call: ATen overloads (`torch.ops.aten.mm.default`) and tuple indexing.
_TARGET = re.compile(r"torch\.ops\.aten\.[A-Za-z0-9_]+\.[A-Za-z0-9_]+|_operator\.getitem")
MAX_JSON_BYTES = 256 << 20  # a JSON member (model.json of a large LM is a few MB)
MAX_EXPR_CHARS = 4096  # real shape expressions are < 200 characters
MAX_EXPR_DEPTH = 32
# JSON nesting the checked reader allows a tree spec: a node is two levels (node, children list), and
# one MAX_EXPR_DEPTH nodes deep is refused by its own walk.
_SPEC_DEPTH = 2 * MAX_EXPR_DEPTH + 8
MAX_EXPR_BITS = 4096  # an upper bound of |value| of any subexpression, in bits (shapes are int64)
INT64 = 1 << 63
# Symbol names torch gives shape symbols (s27, u3, zuf0...); the number is parsed as an int by torch
# and counted up to for unbacked ones, so it is bounded.
_SYMBOL = re.compile(r"[a-z]{1,4}\d{1,6}")
_EXPR_TOKEN = re.compile(r"\s*(?:([A-Za-z_][A-Za-z0-9_]*)|(-?\d+)|'([^'\\]*)'|([(),=]))")
_SYMBOL_FLAGS = frozenset({"positive", "integer", "nonnegative", "negative", "real", "finite"})
# sympy (and torch.utils._sympy.functions) constructors of shape expressions -> (min, max) arguments
_EXPR_CALLS: dict[str, tuple[int, int]] = {
    "Add": (1, 64), "Mul": (1, 64), "Max": (1, 64), "Min": (1, 64), "And": (1, 64), "Or": (1, 64),
    "Pow": (2, 2), "Mod": (2, 2), "PythonMod": (2, 2), "FloorDiv": (2, 2), "CleanDiv": (2, 2),
    "Eq": (2, 2), "Ne": (2, 2), "Lt": (2, 2), "Le": (2, 2), "Gt": (2, 2), "Ge": (2, 2),
    "Not": (1, 1), "CeilToInt": (1, 1), "FloorToInt": (1, 1),
}  # fmt: skip
# Node metadata torch keeps as plain strings; "custom" and "from_node" are JSON it decodes.
_METADATA_KEYS = frozenset({"stack_trace", "nn_module_stack", "torch_fn", "source_fn_stack"})
_TREESPEC_TYPES = frozenset({None, "builtins.tuple", "builtins.list", "builtins.dict"})


class _Refused(Exception):
    """Why a piece of the archive is refused (check_archive adds the file name)."""


class _Expr:
    """Recursive-descent check of one `expr_str` (see the module docstring for the grammar and bounds)."""

    def __init__(self, text: str) -> None:
        if len(text) > MAX_EXPR_CHARS:
            raise _Refused(f"is {len(text)} characters long (at most {MAX_EXPR_CHARS})")
        self.tokens: list[tuple[str, str]] = []
        pos = 0
        while pos < len(text):
            m = _EXPR_TOKEN.match(text, pos)
            if m is None:
                if text[pos:].strip():
                    raise _Refused(f"has {text[pos : pos + 20]!r}, not a sympy constructor call")
                break
            kind = next(k for k, g in zip(("name", "int", "str", "punct"), m.groups()) if g is not None)
            self.tokens.append((kind, m.group(m.lastindex)))
            pos = m.end()
        self.i = 0

    def next(self, kind: str, value: str | None = None) -> str:
        tok = self.tokens[self.i] if self.i < len(self.tokens) else ("end", "")
        if tok[0] != kind or (value is not None and tok[1] != value):
            raise _Refused(f"has {tok[1] or 'its end'!r} where {value or kind} belongs")
        self.i += 1
        return tok[1]

    def peek(self, value: str) -> bool:
        return self.i < len(self.tokens) and self.tokens[self.i] == ("punct", value)

    def check(self) -> None:
        self.call(1)
        if self.i != len(self.tokens):
            raise _Refused("has text after its expression")

    def int64(self) -> int:
        v = int(self.next("int"))
        if not -INT64 <= v < INT64:
            raise _Refused(f"has the integer {str(v)[:20]}... (beyond int64)")
        return v

    def call(self, depth: int) -> tuple[int, int | None]:
        """(an upper bound of the value's bits, the value when the call is Integer(n))."""
        if depth > MAX_EXPR_DEPTH:
            raise _Refused(f"nests deeper than {MAX_EXPR_DEPTH}")
        name = self.next("name")
        self.next("punct", "(")
        literal = None
        if name == "Integer":
            literal = self.int64()
            bits = max(literal.bit_length(), 1)
        elif name == "Rational":
            p = self.int64()
            self.next("punct", ",")
            q = self.int64()
            if q == 0:
                raise _Refused("divides by zero")
            bits = max(p.bit_length(), q.bit_length(), 1)
        elif name == "Symbol":
            sym = self.next("str")
            if not _SYMBOL.fullmatch(sym):
                raise _Refused(f"names the symbol {sym[:20]!r} (not a shape symbol like 's27')")
            while self.peek(","):
                self.next("punct", ",")
                flag = self.next("name")
                self.next("punct", "=")
                if flag not in _SYMBOL_FLAGS or self.next("name") not in ("True", "False"):
                    raise _Refused(f"gives a symbol the option {flag!r}")
            bits = 64  # a shape symbol is an int64
        elif name in _EXPR_CALLS:
            args = [self.call(depth + 1)]
            while self.peek(","):
                self.next("punct", ",")
                args.append(self.call(depth + 1))
            low, high = _EXPR_CALLS[name]
            if not low <= len(args) <= high:
                raise _Refused(f"calls {name} with {len(args)} arguments")
            sizes = [b for b, _ in args]
            if name == "Pow":
                if args[1][1] is None:
                    raise _Refused("raises to a power that is not an integer literal")
                bits = sizes[0] * max(abs(args[1][1]), 1)
            elif name in ("Mul", "FloorDiv", "CleanDiv"):  # a quotient by a Rational can grow
                bits = sum(sizes)
            else:
                bits = max(sizes) + len(sizes)
        else:
            raise _Refused(f"calls {name!r}, which is not an allowed sympy constructor")
        self.next("punct", ")")
        if bits > MAX_EXPR_BITS:
            raise _Refused(f"builds a number of up to {bits} bits (at most {MAX_EXPR_BITS})")
        return bits, literal


def _walk(obj: Any) -> Iterator[tuple[str, Any]]:
    """Every (key, value) pair of a JSON document, depth first; a list's items come with the list's key."""
    stack: list[tuple[str, Any]] = [("", obj)]
    while stack:
        key, o = stack.pop()
        if isinstance(o, dict):
            for k, v in o.items():
                yield k, v
                stack.append((k, v))
        elif isinstance(o, list):
            for v in o:
                yield key, v
                stack.append((key, v))


def _check_treespec(spec: Any) -> None:
    """A call signature's tree spec (pytree protocol 1): tuples, lists and dicts of leaves, whose
    contexts are JSON lists of keys (no `__enum__` object, which pytree would import)."""
    try:  # the checked reader: bounded depth and size, no duplicate keys (an archive is data)
        doc = loads_checked(spec, "tree spec", max_depth=_SPEC_DEPTH)
    except (TypeError, ValueError):  # JSONFileError is a ValueError
        raise _Refused("has a tree spec that is not JSON") from None
    if not (isinstance(doc, list) and len(doc) == 2 and doc[0] == 1):
        raise _Refused("has a tree spec of an unknown protocol")
    stack = [(doc[1], 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_EXPR_DEPTH or not isinstance(node, dict):
            raise _Refused("has a tree spec too deep or not made of nodes")
        if node.get("type") not in _TREESPEC_TYPES:
            raise _Refused(f"has a tree spec of type {str(node.get('type'))[:60]!r}")
        ctx = node.get("context")
        if ctx is not None:
            try:
                keys = loads_checked(ctx, "tree spec context", max_depth=_SPEC_DEPTH)
            except (TypeError, ValueError):
                raise _Refused("has a tree spec context that is not JSON") from None
            if keys is not None and not (
                isinstance(keys, list) and all(isinstance(k, str | int) for k in keys)
            ):
                raise _Refused("has a tree spec context that is not a list of keys")
        children = node.get("children_spec")
        if not isinstance(children, list):
            raise _Refused("has a tree spec without children")
        stack += [(c, depth + 1) for c in children]


def _check_range_constraints(rc: Any) -> None:
    if not isinstance(rc, dict):
        raise _Refused("has no range constraints table")
    for sym, r in rc.items():
        if not _SYMBOL.fullmatch(sym):
            raise _Refused(f"constrains the symbol {sym[:20]!r} (not a shape symbol like 's27')")
        if not isinstance(r, dict) or set(r) != {"min_val", "max_val"}:
            raise _Refused(f"has a range constraint of {sym} that is not min_val/max_val")
        lo, hi = r["min_val"], r["max_val"]
        for v in (lo, hi):
            if v is not None and (type(v) is not int or not -INT64 <= v < INT64):
                raise _Refused(f"bounds {sym} by {str(v)[:20]!r}, not an int64")
        if lo is not None and hi is not None and lo > hi:
            raise _Refused(f"bounds {sym} by an empty range [{lo}, {hi}]")


def _check_value(key: str, value: Any) -> None:
    """One (key, value) pair of model.json, wherever it sits."""
    if type(value) is int and not -INT64 <= value < INT64:
        raise _Refused(f"holds the integer {str(value)[:20]}... under {key!r} (beyond int64)")
    if key in ("target", "as_operator") and isinstance(value, str) and not _TARGET.fullmatch(value):
        raise _Refused(f"calls {value!r}, which is not an ATen operator")
    if key == "expr_str":
        if not isinstance(value, str):
            raise _Refused(f"shape expression {str(value)[:80]!r} is not a plain sympy expression")
        try:
            _Expr(value).check()
        except _Refused as e:
            raise _Refused(
                f"shape expression {value[:80]!r} is not a plain sympy expression: it {e}"
            ) from None
    if key == "metadata" and isinstance(value, dict) and not set(value) <= _METADATA_KEYS:
        raise _Refused(f"has node metadata {sorted(set(value) - _METADATA_KEYS)} that loading would decode")
    if key in ("in_spec", "out_spec"):
        _check_treespec(value)
    if key in ("custom_obj_values", "as_custom_obj") and value:
        raise _Refused("holds a custom object, which loading would unpickle")


def _check_program(name: str, program: Any) -> None:
    if not isinstance(program, dict):
        raise ModelError(f"{name}: not an exported program")
    if program.get("guards_code"):
        raise ModelError(f"{name}: holds guard code, which loading would execute")
    try:
        _check_range_constraints(program.get("range_constraints"))
        for key, value in _walk(program):
            _check_value(key, value)
    except _Refused as e:
        raise ModelError(f"{name}: {e}") from None


def _check_tensor_meta(meta: Any, nbytes: int) -> None:
    """A non-pickled payload: torch views its record as `as_strided(sizes, strides, offset)` and, for
    an empty record, allocates `zeros(sizes)`; both must stay inside what the record holds."""
    import torch
    from torch._export.serde.serialize import deserialize_scalar_type

    if not isinstance(meta, dict):
        raise _Refused("has no tensor metadata")
    try:
        elsize = torch._utils._element_size(deserialize_scalar_type(meta.get("dtype")))
    except Exception:  # an unknown dtype code: whatever torch would raise
        raise _Refused(f"has the dtype code {str(meta.get('dtype'))[:20]!r}") from None
    if meta.get("device") != {"type": "cpu", "index": None}:
        raise _Refused(f"is stored for device {str(meta.get('device'))[:60]}, not the CPU")

    def ints(v: Any) -> list[int]:
        if not isinstance(v, list) or not all(isinstance(x, dict) and set(x) == {"as_int"} for x in v):
            raise _Refused("has sizes or strides that are not plain integers")
        out = [x["as_int"] for x in v]
        if not all(type(x) is int and 0 <= x < INT64 for x in out):
            raise _Refused("has a negative or beyond-int64 size or stride")
        return out

    sizes, strides = ints(meta.get("sizes")), ints(meta.get("strides"))
    (offset,) = ints([meta.get("storage_offset")])
    if len(sizes) != len(strides):
        raise _Refused("has sizes and strides of different lengths")
    if nbytes % elsize:
        raise _Refused(f"has a record of {nbytes} bytes for {elsize}-byte elements")
    numel = 1
    for n in sizes:
        numel *= n
    last = offset + sum((n - 1) * st for n, st in zip(sizes, strides)) if numel else -1
    if last >= nbytes // elsize:
        raise _Refused(f"views {sizes} (strides {strides}, offset {offset}) over a record of {nbytes} bytes")


def _check_payloads(name: str, config: Any, constants: bool, sizes: dict[str, int]) -> None:
    """`sizes`: the byte size of each record of this payload folder, by file name."""
    entries = config.get("config") if isinstance(config, dict) else None
    if not isinstance(entries, dict):
        raise ModelError(f"{name}: not a payload config")
    for fqn, meta in entries.items():
        if not isinstance(meta, dict) or meta.get("use_pickle") is not False:
            raise ModelError(f"{name}: {fqn} is stored as a pickle, which loading would unpickle")
        path_name = str(meta.get("path_name", ""))
        if constants and not path_name.startswith("tensor_"):
            raise ModelError(f"{name}: {fqn} is a custom object, which loading would unpickle")
        if path_name not in sizes:
            raise ModelError(f"{name}: {fqn} is stored in {path_name[:60]!r}, which the archive lacks")
        try:
            _check_tensor_meta(meta.get("tensor_meta"), sizes[path_name])
        except _Refused as e:
            raise ModelError(f"{name}: {fqn} {e}") from None


def _check_sample_inputs(name: str, data: bytes) -> None:
    import torch

    try:
        unsafe = torch.serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(data))
    except Exception as e:  # not a zip-format torch.save: the forced weights-only load refuses it too
        raise ModelError(f"{name}: not a plain torch.save file ({e})") from None
    if unsafe:
        raise ModelError(f"{name}: not plain data (it needs {', '.join(sorted(unsafe))})")


def check_archive(path: str | Path) -> None:
    """Refuse (ModelError naming the file and the reason) an archive that could run code when loaded."""
    p = Path(path)
    try:
        zf = zipfile.ZipFile(p)
    except (OSError, zipfile.BadZipFile) as e:
        raise ModelError(f"{p}: not a torch.export archive ({e})") from None
    with zf:
        names = zf.namelist()
        if len(set(names)) != len(names):
            raise ModelError(f"{p}: the archive names a file twice")
        roots = {n.split("/", 1)[0] for n in names}
        if len(roots) != 1 or any("/" not in n for n in names):
            raise ModelError(f"{p}: not a torch.export archive (files outside one root folder)")
        root = roots.pop()
        for n in names:
            if not _ALLOWED.fullmatch(n.split("/", 1)[1]):
                raise ModelError(f"{p}: unexpected file {n} (not what torch.export.save writes)")

        def read(rel: str, limit: int | None = None) -> bytes:
            try:
                info = zf.getinfo(f"{root}/{rel}")
            except KeyError:
                raise ModelError(f"{p}: {rel} is missing (not a torch.export archive)") from None
            if limit is not None and info.file_size > limit:
                # zipfile stops at the declared size, so the check bounds what is inflated
                raise ModelError(f"{p}: {rel} is {info.file_size:,} bytes (at most {limit:,})")
            try:
                return zf.read(info)
            except (OSError, zipfile.BadZipFile, EOFError) as e:
                raise ModelError(f"{p}: {rel} cannot be read ({e})") from None

        def read_json(rel: str) -> Any:
            # Not core.safe_json: a member is read by this module's own checker, which refuses by the
            # structure it expects (every integer against int64 where it is used, with the field named:
            # "bounds s27 by ..., not an int64"); size is bounded by `read`, RecursionError caught.
            try:
                return json.loads(read(rel, MAX_JSON_BYTES))
            except (ValueError, UnicodeDecodeError, RecursionError) as e:
                # ValueError also covers an integer of more than 4,300 digits
                raise ModelError(f"{p}: {rel} is not JSON ({type(e).__name__}: {str(e)[:200]})") from None

        def record_sizes(folder: str) -> dict[str, int]:
            prefix = f"{root}/{folder}/"
            return {
                i.filename[len(prefix) :]: i.file_size for i in zf.infolist() if i.filename.startswith(prefix)
            }

        _check_program(f"{p}: models/{MODEL}.json", read_json(f"models/{MODEL}.json"))
        wc, cc = f"data/weights/{MODEL}_weights_config.json", f"data/constants/{MODEL}_constants_config.json"
        _check_payloads(f"{p}: {wc}", read_json(wc), False, record_sizes("data/weights"))
        _check_payloads(f"{p}: {cc}", read_json(cc), True, record_sizes("data/constants"))
        si = f"data/sample_inputs/{MODEL}.pt"
        _check_sample_inputs(f"{p}: {si}", read(si, MAX_JSON_BYTES))


def load_program(path: str | Path):
    """The archive's program as a callable module (`torch.export.load(path).module()`), after
    `check_archive`; eval mode, no gradients kept."""
    import torch

    check_archive(path)
    try:
        with weights_only_loads():
            module = torch.export.load(str(path)).module()
    except Exception as e:  # the archive passed the check yet torch refuses it: name the file, no traceback
        raise ModelError(
            f"{path}: torch cannot load the program: {type(e).__name__}: {str(e)[:300]}"
        ) from None
    for p in module.parameters():
        p.requires_grad_(False)
    return module
