"""Manifest reading: YAML/JSON, multi-document, Lists, directories, and errors that say where."""

import json
from pathlib import Path
from typing import Any

import pytest

from policies.api.resource import DeviceClass, ResourceSlice
from webhook.manifests import ManifestError, _released, decode_documents, iter_documents, load, read_documents

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

CLASS = """apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu}
spec:
  selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]
"""


def test_multi_document_yaml_and_order(tmp_path: Path) -> None:
    f = tmp_path / "a.yaml"
    f.write_text(CLASS + "---\n" + CLASS.replace("name: gpu", "name: gpu2"))
    loaded = load([str(f)])
    assert [x.obj.name for x in loaded] == ["gpu", "gpu2"]
    assert [x.source.document for x in loaded] == [1, 2]
    assert isinstance(loaded[0].obj, DeviceClass)


def test_json_and_list_kinds(tmp_path: Path) -> None:
    f = tmp_path / "list.json"
    f.write_text(
        '{"apiVersion": "v1", "kind": "List", "items": ['
        '{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}},'
        '{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n2"}}]}'
    )
    loaded = load([str(f)])
    assert [x.obj.name for x in loaded] == ["n1", "n2"]
    assert str(loaded[1].source) == f"{f}: document 1, items[1]"


def test_directory_is_read_recursively_in_sorted_order() -> None:
    loaded = load([str(EXAMPLES / "gpu-cluster")])
    kinds = {x.obj.kind for x in loaded}
    assert {"DeviceClass", "Node", "ResourceSlice", "ResourceClaim"} <= kinds
    files = [x.source.file for x in loaded]
    assert files == sorted(files)
    slices = [x.obj for x in loaded if isinstance(x.obj, ResourceSlice)]
    assert [s.spec.node_name for s in slices] == ["node-1", "node-2", "node-3"]


def test_not_yaml_names_file_and_line(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text("kind: [unclosed\n")
    with pytest.raises(ManifestError, match=r"bad.yaml: not valid YAML or JSON \(line 2"):
        read_documents([str(f)])


def test_missing_path() -> None:
    with pytest.raises(ManifestError, match="no such file or directory"):
        read_documents(["/nonexistent/x.yaml"])


def test_decode_problems_name_document_and_field(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(
        CLASS.replace("selectors: [", "selectors: 'oops' #[")
        + "---\napiVersion: resource.k8s.io/v2\nkind: DeviceClass\n"
        + "---\napiVersion: v1\nkind: Widget\n"
    )
    loaded, problems = decode_documents(read_documents([str(f)]))
    assert loaded == []
    assert problems[0].startswith(f"{f}: document 1: spec.selectors: Invalid value: 'oops'")
    assert "document 2: apiVersion: Unsupported value: 'resource.k8s.io/v2'" in problems[1]
    assert "document 3: kind: Unsupported value: 'Widget'" in problems[2]


def test_unquoted_timestamps_stay_strings(tmp_path: Path) -> None:
    f = tmp_path / "ts.yaml"
    stamped = "metadata: {name: gpu, creationTimestamp: 2026-01-01T00:00:00Z}"
    f.write_text(CLASS.replace("metadata: {name: gpu}", stamped))
    (loaded,) = load([str(f)])
    assert loaded.obj.metadata.creation_timestamp == "2026-01-01T00:00:00Z"


def test_a_parsed_list_lets_go_of_each_document_it_hands_out() -> None:
    """load() decodes one document at a time; the parsed file must not keep the ones done."""
    values: list[Any] = [{"a": 1}, {"b": 2}]
    handed_out = _released(values)
    assert next(handed_out) == {"a": 1}
    assert values == [None, {"b": 2}]
    assert list(handed_out) == [{"b": 2}] and values == [None, None]


def test_list_items_still_come_in_order_with_their_source(tmp_path: Path) -> None:
    items = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"ns-{i}"}} for i in range(3)]
    f = tmp_path / "list.json"
    f.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    docs = list(iter_documents([str(f)]))
    assert [d.raw["metadata"]["name"] for d in docs] == ["ns-0", "ns-1", "ns-2"]
    assert [str(d.source) for d in docs] == [f"{f}: document 1, items[{i}]" for i in range(3)]
    assert [x.obj.name for x in load([str(f)])] == ["ns-0", "ns-1", "ns-2"]


SCALARS = """\
ints: [1, -2, 0x1F, 0o17, 1_000, +3, 012]
floats: [1.5, -0.5e3, .inf, -.Inf, .nan, 1_0.5]
bools: [true, False, yes, NO, on, Off, y, n, Y, N]
base60: [12:30, -1:30, 1:30.5]
nulls: [null, ~, Null, '', ]
strings: ["1", '2.5', 'true', abc, a b, 2026-01-01, 2026-01-01T00:00:00Z, "", x:y]
nested: {a: {b: [1, {c: d}]}, "1": one, 1: int}
? [complex, key]
: value
"""


def test_implicit_types_are_kubectls(tmp_path: Path) -> None:
    """The loader's own resolver (faster on big dumps) types every plain scalar as PyYAML's does,
    except where kubectl's YAML (go-yaml v2, ``resolve.go``) differs: timestamps stay strings,
    ``y`` and ``n`` are booleans, and ``12:30`` is a string, not the base-60 number 750 (kubectl
    refuses ``labels: {a: y}``, and sends the label ``12:30`` as written). A complex key still loads."""
    import yaml

    path = tmp_path / "scalars.yaml"
    path.write_text(SCALARS.replace("? [complex, key]\n: value\n", ""))
    expected = yaml.safe_load(SCALARS.replace("? [complex, key]\n: value\n", ""))
    expected["strings"][5:7] = ["2026-01-01", "2026-01-01T00:00:00Z"]
    expected["bools"][6:] = [True, False, True, False]
    expected["base60"] = ["12:30", "-1:30", "1:30.5"]
    assert read_documents([str(path)])[0].raw == expected
    complex_key = tmp_path / "complex.yaml"
    complex_key.write_text("? [complex, key]\n: value\nother: 1\n")
    with pytest.raises(ManifestError):  # a list as a key cannot be a dict key in Python, nor JSON's
        read_documents([str(complex_key)])
