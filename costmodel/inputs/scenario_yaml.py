"""Reading a scenario's YAML safely (a file, or the value of one --set) and the course's own
scenario file, with limits checked while the text is read. Imported only when there is YAML to
read: the course's values come from costmodel/inputs/course_scenario.py, generated from its
file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from costmodel.errors import CostModelError
from costmodel.formats import shown
from costmodel.inputs.models import read_input

#: Limits on a scenario's YAML (a file, or the value of one --set), checked while it is read and
#: before any Python object is built: a billion-laughs alias bomb or a deeply nested document is
#: refused in well under a second. Scenario values are flat scalars, so real scenarios are far
#: below them. The file itself may have at most MAX_INPUT_BYTES (1 MiB).
MAX_YAML_NODES = 10_000  #: scalars, lists and mappings, every alias counted as a full copy
MAX_YAML_DEPTH = 50  #: lists and mappings nested in one another
MAX_YAML_INT_DIGITS = 1_000  #: an integer literal longer than this is refused as it is read


class _Refused(yaml.YAMLError):
    """YAML beyond the limits above; the message is '<what> is not allowed; expected <limit>'."""

    def __init__(self, what: str, allowed: str, mark: Any = None):
        where = f" (line {mark.line + 1})" if mark is not None else ""
        super().__init__(f"{what}{where} is not allowed; expected {allowed}")


class _ScenarioLoader(yaml.SafeLoader):
    """PyYAML's safe loader (the pure-Python one: libyaml's composer crashes on deep nesting)
    with the limits above and no duplicate keys."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self._nodes = 0
        self._depth = 0

    def compose_node(self, parent, index):  # noqa: D102 (PyYAML hook)
        if self.check_event(yaml.AliasEvent):
            return super().compose_node(parent, index)
        self._nodes += 1
        if self._nodes > MAX_YAML_NODES:
            raise _Refused(
                f"more than {MAX_YAML_NODES:,} YAML nodes",
                f"at most {MAX_YAML_NODES:,}",
                self.peek_event().start_mark,
            )
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise _Refused(
                    f"nesting deeper than {MAX_YAML_DEPTH} levels",
                    f"at most {MAX_YAML_DEPTH}",
                    self.peek_event().start_mark,
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_document(self):  # noqa: D102
        node = super().compose_document()
        _check_expanded_size(node)
        return node

    def construct_mapping(self, node, deep=False):  # noqa: D102
        if isinstance(node, yaml.MappingNode):
            first_line: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(
                    key_node, yaml.ScalarNode
                ):
                    continue
                key = self.construct_object(key_node)
                line = key_node.start_mark.line + 1
                if key in first_line:
                    raise _Refused(
                        f"key {shown(key)} twice (lines {first_line[key]} and {line})",
                        "each key once",
                    )
                first_line[key] = line
        return super().construct_mapping(node, deep)

    def construct_yaml_int(self, node):  # noqa: D102
        digits = sum(c.isdigit() for c in node.value)
        if digits > MAX_YAML_INT_DIGITS:
            raise _Refused(
                f"an integer of {digits:,} digits",
                f"at most {MAX_YAML_INT_DIGITS:,} digits",
                node.start_mark,
            )
        return super().construct_yaml_int(node)


_ScenarioLoader.add_constructor("tag:yaml.org,2002:int", _ScenarioLoader.construct_yaml_int)


def _check_expanded_size(root: Any) -> None:
    """Refuse a document whose size, with every alias expanded, exceeds MAX_YAML_NODES.

    Counted on the composed node graph (an alias is the same node object as its anchor), with a
    memo per node, so a billion-laughs document costs a few hundred steps, not 9**9."""
    if root is None:
        return
    limit = MAX_YAML_NODES
    memo: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node: Any) -> int:
        ident = id(node)
        if ident in memo:
            return memo[ident]
        if ident in open_nodes:
            raise _Refused(
                "an alias inside its own anchor", "aliases to finished values", node.start_mark
            )
        open_nodes.add(ident)
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [child for pair in node.value for child in pair]
        else:
            children = []
        total = 1
        for child in children:
            total += size(child)
            if total > limit:
                break
        open_nodes.discard(ident)
        memo[ident] = min(total, limit + 1)
        return memo[ident]

    if size(root) > limit:
        raise _Refused(
            f"more than {limit:,} YAML nodes with aliases expanded", f"at most {limit:,}"
        )


def _load(text: str) -> Any:
    """YAML text to Python objects through _ScenarioLoader (raises yaml.YAMLError)."""
    loader = _ScenarioLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a scenario file: a YAML mapping, with a safe loader and the limits above."""
    path = Path(path)
    label = f"scenario file '{path}'"
    text = read_input(path, label)
    try:
        data = _load(text)
    except _Refused as error:
        raise CostModelError(f"{label}: {error}") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        problem = getattr(error, "problem", None) or "invalid YAML"
        raise CostModelError(f"{label}: malformed YAML{where} ({problem})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise CostModelError(
            f"{label}: expected a mapping of keys to values, got {type(data).__name__}"
        )
    return {key if isinstance(key, str) else shown(key): value for key, value in data.items()}


def parse_set(items: list[str] | None) -> dict[str, Any]:
    """--set KEY=VALUE pairs; each value read as a YAML scalar (same loader and limits)."""
    result: dict[str, Any] = {}
    for item in items or []:
        if "=" not in item:
            raise CostModelError(f"--set: {shown(item)} is not allowed; expected KEY=VALUE")
        key, _, text = item.partition("=")
        try:
            value = _load(text) if text.strip() else None
        except _Refused as error:
            raise CostModelError(f"--set {key.strip()}: {error}") from None
        except yaml.YAMLError:
            value = text
        result[key.strip()] = value
    return result


def course_file_values() -> dict[str, Any]:
    """The course's scenario file (package data), read with the safe loader: what
    costmodel/inputs/course_scenario.py holds, generated (`make numeric`), so that a report
    needs no PyYAML for it."""
    # The file beside this module, read without importlib.resources: that import alone
    # (tempfile, shutil, zipfile) cost a cold report about 5 ms.
    source = Path(__file__).with_name("scenarios") / "course.yaml"
    return _load(source.read_text(encoding="utf-8"))
