"""policies.jsonpatch: RFC 6902 add/remove/replace as the API server applies a mutating patch."""

from __future__ import annotations

from typing import Any

import pytest

from policies.jsonpatch import PatchError, apply_patch

POD: dict[str, Any] = {"spec": {"nodeName": "n1", "containers": [{"name": "a"}, {"name": "b"}]}}


def test_the_prescheduled_rewrite_and_the_original_untouched() -> None:
    patch = [
        {"op": "remove", "path": "/spec/nodeName"},
        {"op": "add", "path": "/spec/nodeSelector", "value": {"kubernetes.io/hostname": "n1"}},
    ]
    patched = apply_patch(POD, patch)
    selector = {"kubernetes.io/hostname": "n1"}
    assert patched["spec"] == {"containers": POD["spec"]["containers"], "nodeSelector": selector}
    assert POD["spec"]["nodeName"] == "n1"


def test_pointer_escapes_name_keys_with_slash_and_tilde() -> None:
    doc = {"metadata": {"labels": {}}}
    patched = apply_patch(doc, [
        {"op": "add", "path": "/metadata/labels/kubernetes.io~1hostname", "value": "n1"},
        {"op": "add", "path": "/metadata/labels/a~0b", "value": "x"},
    ])
    assert patched["metadata"]["labels"] == {"kubernetes.io/hostname": "n1", "a~b": "x"}


def test_arrays_insert_append_replace_and_remove() -> None:
    patched = apply_patch(POD, [
        {"op": "add", "path": "/spec/containers/1", "value": {"name": "mid"}},
        {"op": "add", "path": "/spec/containers/-", "value": {"name": "end"}},
        {"op": "replace", "path": "/spec/containers/0", "value": {"name": "first"}},
        {"op": "remove", "path": "/spec/containers/2"},
    ])
    assert [c["name"] for c in patched["spec"]["containers"]] == ["first", "mid", "end"]


def test_replace_the_whole_document() -> None:
    assert apply_patch(POD, [{"op": "replace", "path": "", "value": {"x": 1}}]) == {"x": 1}


@pytest.mark.parametrize(
    ("operation", "message"),
    [
        ({"op": "move", "path": "/spec", "from": "/x"}, "only add, remove and replace"),
        ({"op": "remove", "path": "/spec/nodeSelector"}, "'nodeSelector' does not exist"),
        ({"op": "replace", "path": "/spec/missing/x", "value": 1}, "'missing' does not exist"),
        ({"op": "add", "path": "/spec/containers/5", "value": {}}, "no index '5' in an array of 2"),
        ({"op": "remove", "path": "/spec/containers/2"}, "no index '2' in an array of 2"),
        ({"op": "add", "path": "spec", "value": 1}, "starts with '/'"),
        ({"op": "add", "path": "/spec/nodeName/x", "value": 1}, "neither an object nor an array"),
        ({"op": "remove", "path": ""}, "cannot be removed"),
    ],
)
def test_a_patch_that_does_not_fit_names_the_path(operation: dict[str, Any], message: str) -> None:
    with pytest.raises(PatchError, match=message):
        apply_patch(POD, [operation])
