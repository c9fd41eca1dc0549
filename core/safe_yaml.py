"""The one YAML reader of the project: safe types, no duplicate keys, and bounded size, depth and aliases.

Every config, recipe, selector and `--set`/`--select`/`--option` value a user gives goes through
`load_yaml` (or `read_yaml_file`), so a hostile or mistaken file gets one clear `ConfigError` that
names the file, the line and the limit instead of a silent surprise or an exhausted machine:

- **duplicate keys** (`langid:` twice, `weights: {web: 1, web: 5}`) are refused with the line of
  the second one. PyYAML, like most YAML libraries, keeps the last silently; the YAML spec says keys
  are unique. Merge keys (`<<: *base`) still work: a key written beside a merge overrides it.
- **size**: a file over `MAX_BYTES` is refused before it is parsed (a 50 MB config of 17M list
  items took 243 s and 7.6 GB before PyYAML's C++ allocator aborted).
- **depth and length**: nesting over `MAX_DEPTH`, or more than `MAX_NODES` values, is refused from the
  event stream, before PyYAML's recursive composer can hit Python's recursion limit.
- **aliases**: the document's size with every alias expanded is computed on the node graph (each
  node once, memoised), and a document over `MAX_NODES` is refused. A "billion laughs" file is a
  few hundred bytes that PyYAML reads as a shared graph in microseconds; anything that walks it
  (a deep copy, `json.dumps`, validation) expands it exponentially (3.8 GB in 50 s before this
  guard). A recursive alias is refused too.
- **encoding**: the bytes must be UTF-8; the error names the file and the line of the bad byte.

The limits are far above any real config (the largest shipped file has ~200 nodes and depth 5).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from core.errors import ConfigError

__all__ = ["MAX_BYTES", "MAX_DEPTH", "MAX_NODES", "load_yaml", "read_yaml_file"]

MAX_BYTES = 1024 * 1024
"""Largest YAML text read (a config or recipe is a few KB; PyYAML reads ~0.3 MB/s in pure Python)."""
MAX_DEPTH = 64
"""Deepest nesting of mappings and sequences."""
MAX_NODES = 50_000
"""Most values in a document with every alias expanded (and most parser events: a document past it is
refused while it is read, before PyYAML's pure-Python composer spends seconds on it)."""

_MERGE_TAG = "tag:yaml.org,2002:merge"


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses a key written twice in one mapping."""

    def construct_mapping(self, node: Node, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == _MERGE_TAG or not isinstance(key_node, ScalarNode):
                    continue
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                try:
                    if key in seen:
                        raise _Duplicate(key, line, seen[key])
                    seen[key] = line
                except TypeError:  # an unhashable key: SafeLoader's own error names it below
                    continue
        return super().construct_mapping(node, deep=deep)


class _Duplicate(Exception):
    def __init__(self, key: Any, line: int, first: int) -> None:
        self.key, self.line, self.first = key, line, first


def load_yaml(text: str | bytes, source: str = "<yaml>") -> Any:
    """The YAML value in `text` (str, or bytes that must be UTF-8); ConfigError names `source`."""
    if isinstance(text, bytes):
        if len(text) > MAX_BYTES:
            raise ConfigError(
                f"{source}: {len(text):,} bytes is over the {MAX_BYTES:,}-byte limit of a YAML file"
            )
        text = _decode(text, source)
    elif len(text) > MAX_BYTES:  # characters, a lower bound on the bytes
        raise ConfigError(
            f"{source}: {len(text):,} characters is over the {MAX_BYTES:,}-byte limit of a YAML file"
        )
    try:
        _check_depth(text, source)
        loader = _Loader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            _check_expanded_size(node, source)
            return loader.construct_document(node)
        finally:
            loader.dispose()
    except _Duplicate as d:
        raise ConfigError(
            f"{source}: line {d.line}: duplicate key {d.key!r} (first on line {d.first}); a key may appear once"
        ) from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{source}: not valid YAML: {e}") from None
    except RecursionError:  # belt and braces: the depth check should make this unreachable
        raise ConfigError(f"{source}: nested too deeply to read (limit {MAX_DEPTH} levels)") from None


def read_yaml_file(path: str | Path) -> Any:
    """`load_yaml` of a file's bytes, refusing a file over MAX_BYTES before reading it."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file not found: {p}")
    size = p.stat().st_size
    if size > MAX_BYTES:
        raise ConfigError(f"{p}: {size:,} bytes is over the {MAX_BYTES:,}-byte limit of a YAML file")
    return load_yaml(p.read_bytes(), str(p))


def _decode(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise ConfigError(
            f"{source}: line {line}: byte 0x{data[e.start]:02x} is not UTF-8; save the file as UTF-8"
        ) from None


def _check_depth(text: str, source: str) -> None:
    """Refuse nesting deeper than MAX_DEPTH, or more than MAX_NODES values, reading parser events
    (the parser keeps no recursion)."""
    depth = 0
    for n, event in enumerate(yaml.parse(text, Loader=yaml.SafeLoader)):
        if n > MAX_NODES:
            line = event.start_mark.line + 1 if event.start_mark else "?"
            raise ConfigError(f"{source}: line {line}: more than {MAX_NODES:,} values (the limit)")
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                line = event.start_mark.line + 1 if event.start_mark else "?"
                raise ConfigError(
                    f"{source}: line {line}: nested more than {MAX_DEPTH} levels deep (the limit)"
                )
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _check_expanded_size(root: Node, source: str) -> None:
    """Refuse a document whose alias-expanded node count exceeds MAX_NODES, or a recursive alias.

    Iterative post-order walk with a memo per node: each distinct node is visited once, so a
    billion-laughs graph costs its own (small) size to measure, not its expansion.
    """
    size: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        nid = id(node)
        if children_done:
            on_path.discard(nid)
            total = 1 + sum(size[id(c)] for c in _children(node))
            if total > MAX_NODES:
                line = node.start_mark.line + 1 if node.start_mark else "?"
                raise ConfigError(
                    f"{source}: line {line}: expands to more than {MAX_NODES:,} values through aliases "
                    "(the limit; a YAML alias bomb?)"
                )
            size[nid] = total
            continue
        if nid in size:
            continue
        if nid in on_path:
            line = node.start_mark.line + 1 if node.start_mark else "?"
            raise ConfigError(f"{source}: line {line}: a recursive alias (a value that contains itself)")
        on_path.add(nid)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in on_path:
                line = child.start_mark.line + 1 if child.start_mark else "?"
                raise ConfigError(f"{source}: line {line}: a recursive alias (a value that contains itself)")
            if id(child) not in size:
                stack.append((child, False))


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [n for pair in node.value for n in pair]
    return []
