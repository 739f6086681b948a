"""Reading manifests from files: YAML or JSON, multi-document, ``kind: List``, directories.

This is the file-system edge of the offline commands (validate, allocate, test, audit) and of
``serve --state``. It only reads and splits documents; turning a document into a model is
:func:`policies.api.kinds.decode`, so files and the API server are decoded the same way.
Errors name the file and the document (1-based, as a person counts them in an editor).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from policies.api.base import TypedObject
from policies.api.kinds import DecodeError, decode

SUFFIXES = (".yaml", ".yml", ".json")


class ManifestError(Exception):
    """A file that cannot be read or parsed at all (exit code 2 territory)."""


@dataclass(frozen=True)
class Source:
    """Where a document came from: ``file``, 1-based ``document`` and, inside a List, ``item``."""

    file: str
    document: int
    item: int | None = None

    def __str__(self) -> str:
        where = f"{self.file}: document {self.document}"
        return where if self.item is None else f"{where}, items[{self.item}]"


@dataclass(frozen=True)
class Document:
    raw: Any
    source: Source


@dataclass(frozen=True)
class Loaded:
    obj: TypedObject
    source: Source


def _files(path: str) -> list[str]:
    if os.path.isdir(path):
        found = []
        for root, dirs, names in os.walk(path):
            dirs.sort()
            found += [os.path.join(root, n) for n in sorted(names) if n.endswith(SUFFIXES)]
        return found
    if os.path.exists(path):
        return [path]
    raise ManifestError(f"{path}: no such file or directory")


class _Loader(yaml.SafeLoader):
    """YAML as Kubernetes reads it: timestamps stay strings (``creationTimestamp: 2026-01-01T00:00:00Z``
    is a string field, and kubectl accepts it unquoted)."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _parse(path: str, text: str) -> list[Any]:
    try:
        if path.endswith(".json"):
            return [json.loads(text)]
        return [d for d in yaml.load_all(text, Loader=_Loader) if d is not None]
    except (yaml.YAMLError, json.JSONDecodeError) as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ManifestError(f"{path}: not valid YAML or JSON{where}: {problem}") from None


def _released(values: list[Any]) -> Iterator[Any]:
    """The values of a freshly parsed list, the list letting go of each as it is handed out: a
    consumer that decodes and drops documents one at a time then never holds the whole parsed
    file beside the models (a 5,000-node List is 85 MB of dicts, whose memory the models reuse)."""
    for i in range(len(values)):
        value, values[i] = values[i], None
        yield value


def _expand(raw: Any, source: Source) -> Iterator[Document]:
    # "List" and typed lists ("ResourceSliceList", as kubectl get -o yaml prints) both carry items.
    if (
        isinstance(raw, dict)
        and str(raw.get("kind", "")).endswith("List")
        and isinstance(raw.get("items"), list)
    ):
        for i, item in enumerate(_released(raw["items"])):
            yield Document(item, Source(source.file, source.document, i))
    else:
        yield Document(raw, source)


def iter_documents(paths: Sequence[str]) -> Iterator[Document]:
    """Every document under ``paths``, in order, one at a time; raises :class:`ManifestError` on
    unreadable input."""
    for path in paths:
        for file in _files(path):
            try:
                with open(file, encoding="utf-8") as fh:
                    text = fh.read()
            except (OSError, UnicodeDecodeError) as err:
                raise ManifestError(f"{file}: cannot read: {err}") from None
            parsed = _parse(file, text)
            del text
            for i, raw in enumerate(_released(parsed), start=1):
                yield from _expand(raw, Source(file, i))


def read_documents(paths: Sequence[str]) -> list[Document]:
    """:func:`iter_documents` as a list, for commands that look at documents more than once."""
    return list(iter_documents(paths))


def decode_documents(docs: Iterable[Document]) -> tuple[list[Loaded], list[str]]:
    """Decode what can be decoded; problems come back as ``source: path: message`` lines."""
    loaded: list[Loaded] = []
    problems: list[str] = []
    for doc in docs:
        try:
            loaded.append(Loaded(decode(doc.raw), doc.source))
        except DecodeError as err:
            problems += [f"{doc.source}: {p}" for p in err.problems]
    return loaded, problems


def load(paths: Sequence[str]) -> list[Loaded]:
    """Read and decode; any problem is a :class:`ManifestError` (for commands that need all input)."""
    loaded, problems = decode_documents(iter_documents(paths))
    if problems:
        raise ManifestError("\n".join(problems))
    return loaded
