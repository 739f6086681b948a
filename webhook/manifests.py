"""Reading manifests as kubectl reads them: files, directories (``-R`` to recurse), ``-`` for stdin;
YAML or JSON, multi-document, ``kind: List``.

This is the file-system edge of the offline commands (validate, allocate, convert, test, audit)
and of ``serve --state``. It reads and splits documents; what a document is, and whether the API
server would take it, is :func:`policies.reading.read`'s to say, so files and every command read
the same way. A file that cannot be read or parsed is one error about that file: the others are
still read. Errors name the file and the document (1-based, as a person counts them in an editor).

YAML goes through libyaml when PyYAML has it (several times faster on big ``kubectl get -o yaml``
dumps); a key written twice in one object is remembered (:class:`policies.api.schema.DuplicateKeys`),
because strict decoding refuses it.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TextIO, TypeVar

import yaml

from policies.api.base import TypedObject
from policies.api.kinds import DecodeError, decode
from policies.api.schema import DuplicateKeys, is_namespaced
from policies.priority import Priorities
from policies.reading import DEFAULTS, Reading, ReadOptions, read
from policies.validation.documents import duplicates, judge_existing
from webhook import jsonstream

SUFFIXES = (".yaml", ".yml", ".json")
# JSON files larger than this are read piece by piece (:mod:`webhook.jsonstream`), never whole.
STREAM_BYTES = 16 << 20
STDIN = "-"
STDIN_NAME = "<stdin>"


class ManifestError(Exception):
    """Input that cannot be used (exit code 2 territory for the commands that need all of it)."""


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
class Unreadable:
    """A path that gave no documents: missing, unreadable, or not YAML/JSON. ``message`` names it."""

    path: str
    message: str


@dataclass(frozen=True)
class Loaded:
    obj: TypedObject
    source: Source


# --- files -----------------------------------------------------------------------------------------


def _files(path: str, recursive: bool) -> list[str]:
    """The manifest files of ``path``: itself, or a directory's ``*.yaml|*.yml|*.json`` files in
    name order (and its subdirectories' with ``recursive``, as ``kubectl -R``)."""
    if path == STDIN or not os.path.isdir(path):
        return [path]
    found = []
    for root, dirs, names in os.walk(path):
        dirs.sort()
        found += [os.path.join(root, n) for n in sorted(names) if n.endswith(SUFFIXES)]
        if not recursive:
            break
    return found


def _deeper(directory: str) -> str:
    """The hint for a directory whose manifests are all in its subdirectories (read with ``-R``)."""
    if not _files(directory, recursive=True):
        return ""
    return "; its subdirectories have some: pass -R (--recursive) to read them, as kubectl does"


def _text(file: str, stdin: TextIO) -> str:
    if file == STDIN:
        return stdin.read()
    if not os.path.exists(file):
        raise ManifestError(f"{file}: no such file or directory")
    try:
        with open(file, encoding="utf-8") as fh:
            return fh.read()
    except (OSError, UnicodeDecodeError) as err:
        raise ManifestError(f"{file}: cannot read: {err}") from None


# --- parsing -----------------------------------------------------------------------------------------

K = TypeVar("K")
_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MERGE = "tag:yaml.org,2002:merge"


class _Loader(_BaseLoader):  # type: ignore[misc]
    """YAML as Kubernetes reads it: timestamps stay strings (``creationTimestamp: 2026-01-01T00:00:00Z``
    is a string field, and kubectl accepts it unquoted), plain scalars are typed as kubectl types
    them (:data:`_KUBECTL_PATTERNS`); a mapping with a key written twice becomes a
    :class:`DuplicateKeys` (the last value wins, as in Go).

    Both methods are asked once per node of a file, hundreds of thousands of times in a
    ``kubectl get -o yaml`` dump, so each takes its common case first."""

    def resolve(self, kind: type[yaml.Node], value: Any, implicit: tuple[bool, bool]) -> str:
        """PyYAML's implicit typing (``resolver.Resolver.resolve``) without its path resolvers,
        which this loader has none of: a plain scalar is tried against the patterns for its first
        character, anything else is a string, a sequence or a mapping."""
        if kind is yaml.ScalarNode:
            if implicit[0]:
                for tag, regexp in _IMPLICIT.get(value[:1], ()):
                    if regexp.match(value):
                        return tag
            return _STR
        return _SEQ if kind is yaml.SequenceNode else _MAP

    def construct_yaml_map(self, node: yaml.MappingNode) -> Iterator[dict[str, Any]]:
        if _distinct_keys(node):
            yield from super().construct_yaml_map(node)
            return
        keys = [(k.tag, k.value) for k, _ in node.value if isinstance(k, yaml.ScalarNode) and k.tag != _MERGE]
        if len(set(keys)) == len(keys):
            yield from super().construct_yaml_map(node)
            return
        data = DuplicateKeys(duplicates=tuple(str(value) for _, value in _repeated(keys)))
        yield data
        data.update(self.construct_mapping(node))


def _distinct_keys(node: yaml.MappingNode) -> bool:
    """True when no two keys have the same text, so none repeats; False also when a key is a list
    or a mapping (the full check then decides)."""
    try:
        return len({key.value for key, _ in node.value}) == len(node.value)
    except TypeError:
        return False


# Where kubectl's YAML (sigs.k8s.io/yaml: go-yaml v2, ``resolve.go``) types a plain scalar otherwise
# than PyYAML: ``y``, ``Y``, ``n`` and ``N`` are booleans too, and there are no base-60 numbers
# (``12:30`` is a string). PyYAML's patterns, less its base-60 branches.
_KUBECTL_PATTERNS = {
    "tag:yaml.org,2002:bool": re.compile(
        r"^(?:y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$"
    ),
    "tag:yaml.org,2002:int": re.compile(
        r"^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+)$"
    ),
    "tag:yaml.org,2002:float": re.compile(
        r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
}
_Loader.bool_values = {**yaml.SafeLoader.bool_values, "y": True, "n": False}
_Loader.add_constructor("tag:yaml.org,2002:map", _Loader.construct_yaml_map)
_Loader.yaml_implicit_resolvers = {
    first: [
        (tag, _KUBECTL_PATTERNS.get(tag, regexp))
        for tag, regexp in resolvers
        if tag != "tag:yaml.org,2002:timestamp"
    ]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_IMPLICIT: dict[str, tuple[tuple[str, re.Pattern[str]], ...]] = {
    first: tuple(resolvers) for first, resolvers in _Loader.yaml_implicit_resolvers.items()
}
_STR, _SEQ, _MAP = (f"tag:yaml.org,2002:{kind}" for kind in ("str", "seq", "map"))


def _repeated(keys: list[K]) -> list[K]:
    """The keys that appear more than once, each once, in the order they repeat."""
    seen: set[K] = set()
    repeated: dict[K, None] = {}
    for key in keys:
        if key in seen:
            repeated[key] = None
        seen.add(key)
    return list(repeated)


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data = dict(pairs)
    if len(data) == len(pairs):
        return data
    return DuplicateKeys(data, tuple(_repeated([k for k, _ in pairs])))


def _parse(name: str, text: str, keys: bool = True) -> list[Any]:
    """The documents of a file's text; ``keys``: remember keys written twice (strict decoding)."""
    try:
        if name.endswith(".json"):
            return [json.loads(text, object_pairs_hook=_json_object if keys else None)]
        return [d for d in yaml.load_all(text, Loader=_Loader) if d is not None]
    except (yaml.YAMLError, json.JSONDecodeError) as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        hint = "; a Helm chart's template must be rendered first (helm template)" if "{{" in text else ""
        raise ManifestError(f"{name}: not valid YAML or JSON{where}: {problem}{hint}") from None


def _released(values: list[Any]) -> Iterator[Any]:
    """The values of a freshly parsed list, the list letting go of each as it is handed out: a
    consumer that decodes and drops documents one at a time then never holds the whole parsed
    file beside the models (a 5,000-node List is 85 MB of dicts, whose memory the models reuse)."""
    for i in range(len(values)):
        value, values[i] = values[i], None
        yield value


def _streamed(file: str) -> bool:
    """A JSON file too large to parse whole (``kubectl get pods -A -o json`` of a large cluster)."""
    try:
        return file.endswith(".json") and os.path.getsize(file) > STREAM_BYTES
    except OSError:
        return False


def _stream(file: str, keys: bool) -> Iterator[Document | Unreadable]:
    """A large JSON file's documents as it is read: a List's items one at a time (its top-level
    object is taken for a List when it has an ``items`` array: only Lists do), anything else whole.
    A syntax error ends the file with one :class:`Unreadable`, after the items before it."""
    try:
        with open(file, encoding="utf-8") as fh:
            items = 0
            members: list[tuple[str, Any]] = []  # the top-level object's, but the items
            for key, value in jsonstream.stream(fh, object_pairs_hook=_json_object if keys else None):
                if key == "items[]":
                    yield Document(value, Source(file, 1, items))
                    items += 1
                else:
                    members.append((key, value))
    except (OSError, UnicodeDecodeError) as err:
        yield Unreadable(file, f"{file}: cannot read: {err}")
        return
    except json.JSONDecodeError as err:
        where = f"line {err.lineno}, column {err.colno}"
        yield Unreadable(file, f"{file}: not valid YAML or JSON ({where}): {err.msg}")
        return
    rest = _json_object(members) if keys else dict(members)
    if "" in rest:
        yield from _expand(rest[""], Source(file, 1))
    elif not items:
        yield from _expand(rest, Source(file, 1))


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


def iter_inputs(
    paths: Sequence[str], recursive: bool = False, stdin: TextIO | None = None, keys: bool = True
) -> Iterator[Document | Unreadable]:
    """Every document under ``paths``, in order, one at a time; a path or file that gives none is
    one :class:`Unreadable`, and the others are still read. ``keys=False``: a JSON key written
    twice is not looked for (a third faster, for input read as stored, not strictly)."""
    for path in paths:
        files = _files(path, recursive)
        if not files:
            yield Unreadable(path, f"{path}: a directory with no .yaml, .yml or .json files{_deeper(path)}")
        for file in files:
            name = STDIN_NAME if file == STDIN else file
            if _streamed(file):
                yield from _stream(file, keys)
                continue
            try:
                parsed = _parse(name, _text(file, stdin or sys.stdin), keys)
            except ManifestError as err:
                yield Unreadable(name, str(err))
                continue
            for i, raw in enumerate(_released(parsed), start=1):
                yield from _expand(raw, Source(name, i))


def iter_documents(paths: Sequence[str], recursive: bool = True) -> Iterator[Document]:
    """Every document under ``paths``; raises :class:`ManifestError` on the first unreadable one
    (for inputs that must be read whole: a config, a test suite)."""
    for item in iter_inputs(paths, recursive):
        if isinstance(item, Unreadable):
            raise ManifestError(item.message)
        yield item


def read_documents(paths: Sequence[str], recursive: bool = True) -> list[Document]:
    """:func:`iter_documents` as a list, for commands that look at documents more than once."""
    return list(iter_documents(paths, recursive))


def decode_documents(docs: Iterable[Document]) -> tuple[list[Loaded], list[str]]:
    """Decode what can be decoded, leniently (no strictness, no conversion: for documents that
    are not a user's input, such as the bundled demo); problems are ``source: path: message``."""
    loaded: list[Loaded] = []
    problems: list[str] = []
    for doc in docs:
        try:
            loaded.append(Loaded(decode(doc.raw), doc.source))
        except DecodeError as err:
            problems += [f"{doc.source}: {p}" for p in err.problems]
    return loaded, problems


# --- documents as the commands read them --------------------------------------------------------


@dataclass
class Entry:
    """One document as read (``source``, ``reading``), or one path that could not be read
    (``path``, ``problem`` saying why)."""

    source: Source | None = None
    reading: Reading | None = None
    path: str = ""
    problem: str | None = None

    @property
    def where(self) -> str:
        return str(self.source) if self.source is not None else self.path

    @property
    def label(self) -> str:
        return f"{self.where}: {self.reading.label}" if self.reading is not None else self.where


@dataclass(frozen=True)
class DefaultNamespace:
    """Where ``kubectl apply`` puts the documents that name no namespace: ``-n``, else the
    kubeconfig context's namespace, else ``default``. ``explicit`` (given with ``-n``): a document
    naming another namespace is refused, as kubectl refuses it (upstream
    ``staging/src/k8s.io/cli-runtime/pkg/resource/visitor.go``, SetNamespace and RequireNamespace)."""

    name: str
    explicit: bool = False

    def place(self, raw: Any) -> str | None:
        """Give a namespaced document that names no namespace this one (in place: the parsed
        document is the reader's own); the refusal, in kubectl's words, of one naming another."""
        if not isinstance(raw, dict) or not isinstance(raw.get("metadata"), dict):
            return None
        api_version, kind = raw.get("apiVersion"), raw.get("kind")
        if not (isinstance(api_version, str) and isinstance(kind, str) and is_namespaced(api_version, kind)):
            return None
        given = raw["metadata"].get("namespace")
        if not given:
            raw["metadata"]["namespace"] = self.name
        elif self.explicit and given != self.name:
            return (
                f"metadata.namespace: Invalid value: {json.dumps(given)}: the namespace from the provided "
                f'object "{given}" does not match the namespace "{self.name}". You must pass '
                f"'--namespace={given}' to perform this operation."
            )
        return None


def _read(raw: Any, options: ReadOptions, namespace: DefaultNamespace | None) -> Reading:
    refused = namespace.place(raw) if namespace is not None else None
    reading = read(raw, options)
    if refused is not None:
        reading.errors.insert(0, refused)
    return reading


def read_entries(
    paths: Sequence[str],
    options: ReadOptions = DEFAULTS,
    recursive: bool = False,
    stdin: TextIO | None = None,
    namespace: DefaultNamespace | None = None,
) -> list[Entry]:
    """Every document under ``paths`` read as the API server would read it (placed in
    ``namespace`` when it names none), and every path that could not be read."""
    return entries_of(iter_inputs(paths, recursive, stdin), options, namespace)


def entries_of(
    items: Iterable[Document | Unreadable],
    options: ReadOptions = DEFAULTS,
    namespace: DefaultNamespace | None = None,
) -> list[Entry]:
    """:func:`read_entries` of documents already split (``convert`` keeps each one's JSON), one
    entry per item, in order."""
    return [
        Entry(path=item.path, problem=item.message)
        if isinstance(item, Unreadable)
        else Entry(item.source, _read(item.raw, options, namespace))
        for item in items
    ]


def duplicated(entries: Sequence[Entry]) -> list[tuple[Entry, Entry]]:
    """(later, earlier) for each document naming the same object as an earlier one (kind,
    namespace, name): ``kubectl apply`` of both applies the later one as an update of the earlier."""
    documents = [e for e in entries if e.reading is not None]
    found = duplicates([e.reading for e in documents if e.reading is not None])
    return [(documents[later], documents[earlier]) for later, earlier in found.items()]


def applied_twice(later: Entry, earlier: Entry) -> str:
    """What is said of a document naming the same object as an earlier one (see :func:`duplicated`)."""
    kind = later.reading.kind if later.reading is not None else "object"
    return (
        f"the same {kind} is also in {earlier.where}: kubectl apply applies both, "
        "this one as an update of that one"
    )


def latest(entries: Sequence[Entry]) -> tuple[list[Entry], list[str]]:
    """The entries describing one cluster: a document naming the same object as a later one is
    replaced by it, as ``kubectl apply`` of both leaves the later one in the cluster; with a note
    naming both places for each, so that no answer depends silently on the order of the files."""
    pairs = duplicated(entries)
    replaced = {id(earlier) for _, earlier in pairs}
    notes = [
        f"note: {later.label} replaces the one in {earlier.where} (the later document wins, as with "
        "kubectl apply)"
        for later, earlier in pairs
    ]
    return [e for e in entries if id(e) not in replaced], notes


def priority_classes(entries: Iterable[Entry]) -> Priorities:
    """The PriorityClasses a cluster holds after the entries' are created in order."""
    return Priorities.among(e.reading.obj for e in entries if e.reading is not None and e.reading.obj)


def existing_warnings(
    entries: Iterable[Entry], *, allow_privileged: bool = True, priorities: Priorities | None = None
) -> list[str]:
    """What validation says of documents describing objects a cluster already holds
    (:func:`policies.validation.documents.judge_existing`; ``priorities``: the cluster's
    PriorityClasses), as ``warning: where: kind name: ...`` lines."""
    return [
        f"warning: {entry.label}: {line}"
        for entry in entries
        if entry.reading is not None
        for line in judge_existing(entry.reading, allow_privileged=allow_privileged, priorities=priorities)
    ]


def problems(entries: Iterable[Entry]) -> list[str]:
    """Every problem of the entries as ``where: kind name: message`` lines."""
    lines: list[str] = []
    for entry in entries:
        if entry.reading is None:
            lines.append(entry.problem or entry.where)
        else:
            lines += [f"{entry.label}: {e}" for e in entry.reading.errors]
    return lines


def skipped_kinds(entries: Iterable[Entry]) -> dict[str, str]:
    """Kind -> why documents of it were skipped, once per kind, in the order first seen."""
    found: dict[str, str] = {}
    for entry in entries:
        reading = entry.reading
        if reading is not None and reading.skipped is not None:
            found.setdefault(reading.kind, reading.skipped)
    return found


def load(
    paths: Sequence[str],
    options: ReadOptions = DEFAULTS,
    recursive: bool = True,
    say: Callable[[str], None] | None = None,
) -> list[Loaded]:
    """The objects of a cluster state (``serve --state``, a test suite's state): read as the
    commands read them, the later of two documents naming the same object winning, workloads'
    templates left out (they are not pods of the cluster); a problem reading them is a
    :class:`ManifestError` listing them all. ``say`` is told the notes about replaced documents and
    what validation says of the objects (warnings: the cluster holds them already)."""
    entries, notes = latest(read_entries(paths, options, recursive))
    found = problems(entries)
    if found:
        raise ManifestError("\n".join(found))
    if say is not None:
        privileged, priorities = options.allow_privileged, priority_classes(entries)
        warnings = existing_warnings(entries, allow_privileged=privileged, priorities=priorities)
        for line in [*notes, *warnings]:
            say(line)
    return [
        Loaded(e.reading.obj, e.source)
        for e in entries
        if e.source is not None
        and e.reading is not None
        and e.reading.obj is not None
        and e.reading.template is None
    ]
