"""DatasetSnapshot manifests as text, from a few parameters: the one builder tests and bench/ share.

Tests and benchmarks need many small projects whose manifests differ in a name, a read schema, a merge
strategy or a query. Writing each as a YAML template invites drift (a template that is no longer valid
ODF, or that differs from the next one in ways nobody meant). These helpers build the manifest as data
and write it with PyYAML: multi-line strings (queries) as literal blocks, strings holding a Jinja tag
(``{{ var('x') }}``) in double quotes so templating still sees the tag intact.

The bench scripts import this module from the repository (``bench/`` puts the repository root on
``sys.path``); it is test tooling, not part of the product.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import yaml

__all__ = ["derivative", "dump", "ledger", "root", "set_info", "snapshot"]

Event = Mapping[str, Any]


class _Dumper(yaml.SafeDumper):
    """Block style, keys in the order given, lists indented under their key."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    if "{{" in value or "{%" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"')
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


def _flow_list(dumper: yaml.SafeDumper, value: tuple[Any, ...]) -> yaml.SequenceNode:
    """Tuples are written inline (``primaryKey: [id]``), lists as blocks."""
    return dumper.represent_sequence("tag:yaml.org,2002:seq", value, flow_style=True)


_Dumper.add_representer(str, _str)
_Dumper.add_representer(tuple, _flow_list)


def dump(document: Mapping[str, Any]) -> str:
    """``document`` as YAML text in the manifests' style."""
    return yaml.dump(dict(document), Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=1000)


def snapshot(name: str, kind: str, metadata: Sequence[Event]) -> str:
    """A DatasetSnapshot manifest (``version: 1``)."""
    content = {"name": name, "kind": kind, "metadata": [dict(e) for e in metadata]}
    return dump({"kind": "DatasetSnapshot", "version": 1, "content": content})


def ledger(*primary_key: str) -> dict[str, Any]:
    return {"kind": "Ledger", "primaryKey": tuple(primary_key)}


def set_info(description: str, keywords: Sequence[str] = ()) -> dict[str, Any]:
    info: dict[str, Any] = {"kind": "SetInfo", "description": description}
    if keywords:
        info["keywords"] = tuple(keywords)
    return info


def root(
    name: str,
    *,
    path: str,
    schema: Sequence[str],
    merge: Mapping[str, Any] | None = None,
    read: Mapping[str, Any] | None = None,
    order: str | None = None,
    extra: Sequence[Event] = (),
) -> str:
    """A root with a FilesGlob polling source reading CSV with a header (``read`` overrides the read step).

    ``merge`` defaults to Append; ``extra`` events (SetVocab, SetInfo...) follow the source.
    """
    fetch: dict[str, Any] = {"kind": "FilesGlob", "path": path}
    if order is not None:
        fetch["order"] = order
    read_step = dict(read) if read is not None else {"kind": "Csv", "header": True}
    read_step["schema"] = list(schema)
    source = {
        "kind": "SetPollingSource",
        "fetch": fetch,
        "read": read_step,
        "merge": dict(merge) if merge is not None else {"kind": "Append"},
    }
    return snapshot(name, "Root", [source, *extra])


def derivative(
    name: str,
    inputs: Sequence[str] | Mapping[str, str],
    query: str,
    *,
    extra: Sequence[Event] = (),
) -> str:
    """A derivative with one Spark SQL query; ``inputs`` are dataset names, or aliases -> dataset names."""
    pairs = inputs.items() if isinstance(inputs, Mapping) else ((None, i) for i in inputs)
    transform_inputs = [
        {"datasetRef": ref, **({"alias": alias} if alias is not None else {})} for alias, ref in pairs
    ]
    transform = {
        "kind": "SetTransform",
        "inputs": transform_inputs,
        "transform": {"kind": "Sql", "engine": "spark", "query": query.rstrip("\n") + "\n"},
    }
    return snapshot(name, "Derivative", [transform, *extra])
