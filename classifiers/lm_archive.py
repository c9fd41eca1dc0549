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

So `check_archive` reads the archive as plain data first (zip listing, JSON) and refuses, naming the
file and the reason, anything but what `torch.export.save` writes for a plain tensor program: the
known file names only, no pickled payloads, no custom or opaque objects, no guard code, symbolic
expressions from a small grammar of sympy constructors (no dots, no quotes but symbol names), and
graph targets that are ATen operators or `operator.getitem`. Only then does `load_program` call
`torch.export.load`, with `TORCH_FORCE_WEIGHTS_ONLY_LOAD=1` (trainer/checkpoint.py's rule) so the one
pickle left, the sample inputs, is read weights-only too. tests/classifiers/test_perplexity.py
plants each of these in a real archive and checks that nothing runs.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from classifiers.model import ModelError

FORCE_WEIGHTS_ONLY = "TORCH_FORCE_WEIGHTS_ONLY_LOAD"
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
# A symbolic shape expression: sympy constructors over integers and shape symbols, e.g.
# "Mul(Integer(8), Symbol('s27', positive=True, integer=True))". No attribute access, no other strings.
_EXPR_TOKEN = re.compile(r"\s*(?:([A-Za-z_][A-Za-z0-9_]*)|(-?\d+)|('[a-z]+\d+')|([(),=*+/-]))")
_EXPR_NAMES = frozenset(
    {
        "Symbol", "Integer", "Rational", "Mul", "Add", "Pow", "Mod", "Max", "Min", "FloorDiv",
        "CleanDiv", "CeilToInt", "FloorToInt", "PythonMod", "Eq", "Ne", "Lt", "Le", "Gt", "Ge",
        "And", "Or", "Not", "positive", "integer", "nonnegative", "real", "finite", "True", "False",
    }
)  # fmt: skip


def _safe_expr(expr: str) -> bool:
    pos = 0
    while pos < len(expr):
        m = _EXPR_TOKEN.match(expr, pos)
        if m is None or m.end() == pos:
            return expr[pos:].strip() == ""
        if m.group(1) is not None and m.group(1) not in _EXPR_NAMES:
            return False
        pos = m.end()
    return True


def _walk(obj: Any) -> Iterator[tuple[str, Any]]:
    """Every (key, value) pair of a JSON document, depth first."""
    stack = [obj]
    while stack:
        o = stack.pop()
        if isinstance(o, dict):
            for k, v in o.items():
                yield k, v
                stack.append(v)
        elif isinstance(o, list):
            stack.extend(o)


def _check_program(name: str, program: Any) -> None:
    if not isinstance(program, dict):
        raise ModelError(f"{name}: not an exported program")
    if program.get("guards_code"):
        raise ModelError(f"{name}: holds guard code, which loading would execute")
    for key, value in _walk(program):
        if key == "target" and isinstance(value, str) and not _TARGET.fullmatch(value):
            raise ModelError(f"{name}: calls {value!r}, which is not an ATen operator")
        if key == "expr_str" and not (isinstance(value, str) and _safe_expr(value)):
            raise ModelError(f"{name}: shape expression {str(value)[:80]!r} is not a plain sympy expression")


def _check_payloads(name: str, config: Any, constants: bool) -> None:
    entries = config.get("config") if isinstance(config, dict) else None
    if not isinstance(entries, dict):
        raise ModelError(f"{name}: not a payload config")
    for fqn, meta in entries.items():
        if not isinstance(meta, dict) or meta.get("use_pickle") is not False:
            raise ModelError(f"{name}: {fqn} is stored as a pickle, which loading would unpickle")
        if constants and not str(meta.get("path_name", "")).startswith("tensor_"):
            raise ModelError(f"{name}: {fqn} is a custom object, which loading would unpickle")


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

        def read(rel: str) -> bytes:
            try:
                return zf.read(f"{root}/{rel}")
            except KeyError:
                raise ModelError(f"{p}: {rel} is missing (not a torch.export archive)") from None

        def read_json(rel: str) -> Any:
            try:
                return json.loads(read(rel))
            except (ValueError, UnicodeDecodeError) as e:
                raise ModelError(f"{p}: {rel} is not JSON ({e})") from None

        _check_program(f"{p}: models/{MODEL}.json", read_json(f"models/{MODEL}.json"))
        wc, cc = f"data/weights/{MODEL}_weights_config.json", f"data/constants/{MODEL}_constants_config.json"
        _check_payloads(f"{p}: {wc}", read_json(wc), constants=False)
        _check_payloads(f"{p}: {cc}", read_json(cc), constants=True)
        _check_sample_inputs(f"{p}: data/sample_inputs/{MODEL}.pt", read(f"data/sample_inputs/{MODEL}.pt"))


@contextlib.contextmanager
def weights_only_loads() -> Iterator[None]:
    """Every `torch.load` inside is weights-only, also torch's own `weights_only=False` calls
    (torch reads TORCH_FORCE_WEIGHTS_ONLY_LOAD at each call and lets it override the argument)."""
    old = os.environ.get(FORCE_WEIGHTS_ONLY)
    os.environ[FORCE_WEIGHTS_ONLY] = "1"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(FORCE_WEIGHTS_ONLY, None)
        else:
            os.environ[FORCE_WEIGHTS_ONLY] = old


def load_program(path: str | Path):
    """The archive's program as a callable module (`torch.export.load(path).module()`), after
    `check_archive`; eval mode, no gradients kept."""
    import torch

    check_archive(path)
    with weights_only_loads():
        module = torch.export.load(str(path)).module()
    for p in module.parameters():
        p.requires_grad_(False)
    return module
