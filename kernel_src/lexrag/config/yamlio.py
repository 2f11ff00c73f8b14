"""Reading YAML safely: one loader for config files, ``--set`` values, notebook parameters,
expected-score files and the manifest.  It refuses a key given twice in one mapping and a
document whose aliases expand beyond a bound, and names the line and column of an error."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable, Iterable

import yaml

from lexrag.errors import ConfigError, short

__all__ = ["UniqueKeyLoader", "load_yaml", "read_yaml_file", "yaml_problem", "bounded_size", "yaml12_number", "MAX_YAML_NODES"]


# 1e-3: a float in YAML 1.2, a string to PyYAML (YAML 1.1, which wants a dot: 1.0e-3)
EXPONENT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")


def yaml12_number(value: Any) -> Any:
    """``value``, with a string YAML 1.2 reads as a float (``1e-3``) read as that float."""
    return float(value) if isinstance(value, str) and EXPONENT.fullmatch(value.strip()) else value


def load_yaml(text: str):
    """A YAML string read with :class:`UniqueKeyLoader` (``yaml.YAMLError`` on bad input)."""
    return yaml.load(text, Loader=UniqueKeyLoader)


def yaml_problem(e: yaml.YAMLError) -> str:
    """A YAML error in one line: where (line, column) and what, without the quoted snippet."""
    mark = getattr(e, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return where + (getattr(e, "problem", None) or str(e).splitlines()[0])


def read_yaml_file(path: str | Path, error: type[Exception] = ConfigError):
    """A YAML file (UTF-8, a BOM tolerated) read safely, a key given twice refused; a file that
    is not a regular file, not UTF-8, nested too deeply or not YAML is ``error`` naming it (with
    the line and the column where YAML says)."""
    from lexrag.io.inputfiles import read_text_file

    path = Path(path)
    text = read_text_file(path, error)  # a regular file only (a FIFO would wait for ever), UTF-8
    if text[:4096].count("\x00") > len(text[:4096]) // 4:  # ASCII saved as UTF-16 without a byte-order mark
        raise error(f"{path}: UTF-16/UTF-32, not UTF-8 text (NUL bytes between the letters); save it as UTF-8")
    try:
        return yaml.load(text, Loader=UniqueKeyLoader)
    except yaml.YAMLError as e:
        raise error(f"{path}: not valid YAML: {yaml_problem(e)}") from None
    except RecursionError:
        raise error(f"{path}: nested too deeply to read") from None


class UniqueKeyLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses a key given twice in one mapping (YAML would keep the last
    silently: a second ``count:`` section would undo the first), and a document whose aliases
    expand it beyond :data:`MAX_YAML_NODES` nodes (an alias bomb of a few hundred bytes grows to
    gigabytes when printed, copied or walked)."""

    def get_single_node(self):
        node = super().get_single_node()
        if node is not None and self._aliased:
            n = _node_size(node, MAX_YAML_NODES)
            if n > MAX_YAML_NODES:
                raise yaml.composer.ComposerError(
                    None, None, f"its aliases expand it to more than {MAX_YAML_NODES:,} nodes (an alias bomb?); "
                    "write the values out or use fewer aliases", node.start_mark)
        return node

    def compose_node(self, parent, index):
        if self.check_event(yaml.events.AliasEvent):
            self._aliased = True
        return super().compose_node(parent, index)

    _aliased = False

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base`: merged by the parent class
                continue
            key = self.construct_object(key_node, deep=deep)
            try:
                hash(key)
            except TypeError:  # a list or map as a key: the parent class names it
                continue
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {short(key)} appears twice (lines {seen[key] + 1} and {key_node.start_mark.line + 1})",
                    key_node.start_mark)
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, UniqueKeyLoader.construct_mapping)

# numbers as YAML 1.2 reads them: YAML 1.1 (PyYAML's default) reads "1:30" as 90 (base 60) and "5_0" as 50; such text
# stays a string here, which a numeric field refuses by name, and "1e-3" is the float it is
_INT, _FLOAT = "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"
UniqueKeyLoader.yaml_implicit_resolvers = {k: [(tag, rx) for tag, rx in v if tag not in (_INT, _FLOAT)]
                                           for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()}
UniqueKeyLoader.add_implicit_resolver(_INT, re.compile(r"^(?:[-+]?(?:0|[1-9][0-9]*)|0x[0-9a-fA-F]+)$"), list("-+0123456789"))
UniqueKeyLoader.add_implicit_resolver(
    _FLOAT, re.compile(r"^(?:[-+]?(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[-+]?[0-9]+[eE][-+]?[0-9]+"
                       r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"),
    list("-+0123456789."))

MAX_YAML_NODES = 100_000  # a YAML document with aliases expands to at most this many nodes


def bounded_size(root: Any, children: Callable[[Any], Iterable[Any] | None], limit: int) -> int:
    """Nodes of a tree whose shared nodes count each time they occur (what printing or copying
    it would expand), counted with one memo per node, so it costs the tree's size, not its
    expansion; past ``limit`` (or a node that contains itself) it returns ``limit + 1``.
    ``children(node)`` gives a node's children, or None for a leaf."""
    sizes: dict[int, int] = {}
    active: set[int] = set()

    def size(n: Any) -> int:
        kids = children(n)
        if kids is None:
            return 1
        key = id(n)
        if key in sizes:
            return sizes[key]
        if key in active:
            return limit + 1
        active.add(key)
        total = 1
        for child in kids:
            total += size(child)
            if total > limit:
                break
        active.discard(key)
        sizes[key] = total = min(total, limit + 1)
        return total

    return size(root)


def _node_size(node: Any, limit: int) -> int:
    """Nodes of a composed YAML document with every alias expanded."""
    def children(n: Any) -> Iterable[Any] | None:
        if isinstance(n, yaml.ScalarNode):
            return None
        return (x for kv in n.value for x in kv) if isinstance(n, yaml.MappingNode) else n.value

    return bounded_size(node, children, limit)
