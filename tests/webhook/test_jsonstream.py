"""webhook.jsonstream and its use by webhook.manifests: a JSON file read piece by piece gives what
``json.loads`` gives of it whole, wherever the chunks end.

The reader parses each value once its text is complete and reads on when a value is cut by the end
of a chunk; with chunks of one to seven characters every value of the documents below is cut at
every place at least once, so a value taken for complete too early (a number, a literal, a string
with escapes) shows. Errors must name the line and column ``json.loads`` names.
"""

from __future__ import annotations

import io
import json
import random
import re
from pathlib import Path
from typing import Any

import pytest

from webhook import jsonstream, manifests
from webhook.manifests import Document, Source, Unreadable, iter_inputs

CHUNKS = [1, 2, 3, 4, 5, 6, 7, 64, 1 << 20]


def _scalar(rng: random.Random) -> Any:
    return rng.choice(
        [
            0, -1, 7, 123456789, -42, 10**20, 3.14, -0.5, 2.5e10, 1e-7, 6.02e23, 1.0,
            True, False, None, "", "gpu-0", 'quote " and \\ backslash', "tab\tnew\nline", "é ü 漢字 🚀",
            "\u0000 control", "{not: an object}", "[1, 2]", "items",
        ]
    )  # fmt: skip


def _value(rng: random.Random, depth: int) -> Any:
    if depth > 3 or rng.random() < 0.4:
        return _scalar(rng)
    if rng.random() < 0.5:
        return [_value(rng, depth + 1) for _ in range(rng.randrange(0, 4))]
    keys = ["name", "items", "spec", "value", "a b", "ключ", "x" * rng.randrange(1, 5)]
    return {rng.choice(keys) + str(i): _value(rng, depth + 1) for i in range(rng.randrange(0, 4))}


def _pod(rng: random.Random, i: int) -> dict[str, Any]:
    return {
        "metadata": {"name": f"pod{i}", "namespace": "gpu-test1", "labels": {"app": "pod", "index": str(i)}},
        "spec": {
            "containers": [
                {"name": "ctr0", "image": "ubuntu:24.04", "resources": {"claims": [{"name": "gpu"}]}}
            ],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}],
            "priority": rng.choice([0, 1000, -5]),
            "overhead": {"cpu": "250m"},
            "extra": _value(rng, 1),
        },
        "status": {"phase": "Running", "weights": [rng.random(), 1e300, -2.5e-3]},
    }


def documents() -> list[str]:
    """JSON texts: Lists as kubectl prints them (pretty and compact, items first or last, empty),
    objects without items, an ``items`` that is not an array, and documents that are not objects."""
    rng = random.Random(23)
    texts = []
    for n in range(12):
        items = [_pod(rng, i) for i in range(rng.randrange(0, 5))]
        doc: dict[str, Any] = {
            "apiVersion": "v1",
            "items": items,
            "kind": "List",
            "metadata": {"resourceVersion": ""},
        }
        if n % 3 == 1:
            doc = {
                "kind": "PodList",
                "metadata": {"continue": "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ"},
                "items": items,
            }
        texts.append(json.dumps(doc, indent=rng.choice([None, 2, 4]), ensure_ascii=rng.random() < 0.5))
    texts += [
        json.dumps({"kind": "Pod", "metadata": {"name": "alone", "items": [1, 2]}, "spec": {"items": [[3]]}}),
        '{"items": 5, "kind": "List"}',
        '{"items": {"a": [1, 2.5e3]}, "more": [1.5, 2e-3]}',
        '{"kind": "List", "items": []}',
        '{"kind": "List", "items": [ ] , "metadata": {} }',
        "{}",
        " \n\t{ }\r\n",
        '{"items": [[], {}, "", 0, -0.0, 1E+2, 1e-2, 12.5e1, true, false, null]}',
        '{"a": 1, "items": [1], "b": 2, "items2": [2]}',
        '[{"kind": "Pod"}, 1, 2.25]',
        "12345.678e-2",
        '"just a string \\u00e9\\ud83d\\ude80"',
        "null",
        json.dumps({"items": [_value(rng, 0) for _ in range(30)], "tail": _value(rng, 0)}),
    ]
    return texts


DOCUMENTS = documents()


def expected(text: str) -> list[tuple[str, Any]]:
    """The members json.loads finds, as :func:`jsonstream.stream` is meant to yield them."""
    whole = json.loads(text)
    if not isinstance(whole, dict):
        return [("", whole)]
    members: list[tuple[str, Any]] = []
    for key, value in whole.items():
        if key == "items" and isinstance(value, list) and value:
            members += [("items[]", item) for item in value]
        else:
            members.append((key, value))
    return members


def streamed(text: str) -> list[tuple[str, Any]]:
    return list(jsonstream.stream(io.StringIO(text)))


@pytest.mark.parametrize("chunk", CHUNKS)
def test_members_and_items_are_what_json_loads_finds(chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonstream, "CHUNK", chunk)
    for text in DOCUMENTS:
        got = streamed(text)
        want = expected(text)
        # json.dumps of both: 0 and 0.0 or 1 and True would compare equal as Python values.
        assert json.dumps(got) == json.dumps(want), text


def test_the_object_pairs_hook_sees_every_object() -> None:
    seen: list[list[str]] = []

    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        seen.append([k for k, _ in pairs])
        return dict(pairs)

    text = '{"kind": "List", "items": [{"a": {"b": 1}}, {"c": 2, "c": 3}]}'
    assert list(jsonstream.stream(io.StringIO(text), object_pairs_hook=hook)) == [
        ("kind", "List"),
        ("items[]", {"a": {"b": 1}}),
        ("items[]", {"c": 3}),
    ]
    assert seen == [["b"], ["a"], ["c", "c"]]


BROKEN = [
    '{"kind": "List", "items": [{"a": 1} {"b": 2}]}',
    '{"kind": "List",\n  "items": [\n    {"a": 1},\n    {"b": tru}\n  ]\n}',
    '{"kind": "List", "items": [{"a": 1},]}',
    '{"kind": "List", "items": [{"a": 1}',
    '{"kind": "List", "items": [{"a": "unterminated}]}',
    '{"kind": "List"\n "items": []}',
    '{"kind": "List", 5: []}',
    '{"kind" "List"}',
    '{"kind": "List",}',
    '{"kind": "List"} trailing',
    '{"kind": "List"}\n\n  {"second": "document"}',
    '{"items": [1, 2]]}',
    '{"items": [1 2]}',
    "",
    "   \n  ",
    "[1, 2",
    '{"a": [1.5e, 2]}',
    '{"a": -}',
    '{"items": [1.]}',
    '{"a": "bad \\x escape"}',
    '{\n\n\n        "kind": "List", "items": [\n {"deep": [[[[{"x": nope}]]]]}]}',
]


@pytest.mark.parametrize("chunk", CHUNKS)
@pytest.mark.parametrize("text", BROKEN)
def test_errors_name_the_line_and_column_json_loads_names(
    text: str, chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jsonstream, "CHUNK", chunk)
    with pytest.raises(json.JSONDecodeError) as want:
        json.loads(text)
    with pytest.raises(json.JSONDecodeError) as got:
        streamed(text)
    assert (got.value.lineno, got.value.colno) == (want.value.lineno, want.value.colno)


# --- manifests: a large JSON file is streamed and gives the same documents --------------------------


def _kubectl_list(kind: str, items: list[dict[str, Any]]) -> str:
    return json.dumps(
        {"apiVersion": "v1", "items": items, "kind": kind, "metadata": {"resourceVersion": ""}}, indent=4
    )


def _pod_manifest(i: int) -> dict[str, Any]:
    rng = random.Random(i)
    return {"apiVersion": "v1", "kind": "Pod", **_pod(rng, i)}


FILES = {
    "pods.json": _kubectl_list("List", [_pod_manifest(i) for i in range(6)]),
    "podlist.json": _kubectl_list("PodList", [_pod_manifest(i) for i in range(3)]),
    "empty.json": _kubectl_list("List", []),
    "pod.json": json.dumps(_pod_manifest(9)),
    "not-a-list.json": json.dumps({"kind": "Pod", "metadata": {"name": "x"}, "spec": {"items": [1]}}),
    "array.json": json.dumps([_pod_manifest(1), _pod_manifest(2)]),
    "duplicate-key-item.json": '{"kind": "List", "items": [{"kind": "Pod", "kind": "Pod", "metadata": {}}]}',
}


def _read(paths: list[str], keys: bool) -> list[tuple[str, Any, Source | None, type]]:
    found = []
    for item in iter_inputs(paths, keys=keys):
        if isinstance(item, Document):
            found.append((json.dumps(item.raw), type(item.raw), item.source, Document))
        else:
            found.append((item.path, None, None, Unreadable))
    return found


@pytest.mark.parametrize("keys", [True, False])
def test_a_large_file_streamed_gives_the_documents_of_the_whole_file(
    tmp_path: Path, keys: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, text in FILES.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    paths = [str(tmp_path / name) for name in FILES]
    whole = _read(paths, keys)
    monkeypatch.setattr(manifests, "STREAM_BYTES", 10)
    monkeypatch.setattr(jsonstream, "CHUNK", 5)
    opened: list[str] = []
    stream = jsonstream.stream

    def counted(source: Any, object_pairs_hook: Any = None) -> Any:
        opened.append(source.name)
        return stream(source, object_pairs_hook)

    monkeypatch.setattr(jsonstream, "stream", counted)
    streamed_ = _read(paths, keys)
    assert opened == paths  # every file was read piece by piece
    assert streamed_ == whole
    # The files do hold what the cases are about: items, none, and documents that are not Lists.
    sources = [source for _, _, source, _ in whole]
    assert sum(1 for s in sources if s is not None and s.file.endswith("pods.json")) == 6
    assert not any(s is not None and s.file.endswith("empty.json") for s in sources)
    assert Source(str(tmp_path / "not-a-list.json"), 1) in sources


def test_a_broken_large_file_is_one_error_at_the_place_the_whole_file_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the items read before it; both paths name the same line and column."""
    text = _kubectl_list("List", [_pod_manifest(i) for i in range(3)])
    broken = text.replace('"name": "pod2"', '"name": "pod2",,')
    path = tmp_path / "pods.json"
    path.write_text(broken, encoding="utf-8")
    whole = list(iter_inputs([str(path)]))
    monkeypatch.setattr(manifests, "STREAM_BYTES", 10)
    streamed_ = list(iter_inputs([str(path)]))
    assert [type(x) for x in whole] == [Unreadable]
    assert [type(x) for x in streamed_] == [Document, Document, Unreadable]
    where = re.compile(r"line (\d+),? column (\d+)")
    whole_error, streamed_error = whole[0], streamed_[-1]
    assert isinstance(whole_error, Unreadable) and isinstance(streamed_error, Unreadable)
    found_whole = where.search(whole_error.message)
    found_streamed = where.search(streamed_error.message)
    assert found_whole is not None and found_streamed is not None
    assert found_whole.groups() == found_streamed.groups()


def test_a_key_written_twice_in_a_large_object_that_is_not_a_list_is_remembered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Strict reading refuses a key written twice (policies.api.schema.DuplicateKeys); the whole
    file's parse remembers one at the top level, and so must the streamed one."""
    path = tmp_path / "pod.json"
    path.write_text('{"apiVersion": "v1", "kind": "Pod", "kind": "Pod", "metadata": {"name": "x"}}')
    whole = list(iter_inputs([str(path)]))
    monkeypatch.setattr(manifests, "STREAM_BYTES", 10)
    streamed_ = list(iter_inputs([str(path)]))
    assert isinstance(whole[0], Document) and isinstance(streamed_[0], Document)
    assert type(streamed_[0].raw) is type(whole[0].raw)
    assert getattr(streamed_[0].raw, "duplicates", None) == getattr(whole[0].raw, "duplicates", ())
