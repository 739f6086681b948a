"""The demo's bundled manifests: the same as examples/, and a review the server can answer."""

from __future__ import annotations

import json
from pathlib import Path

from webhook import demo
from webhook.manifests import decode_documents
from webhook.review import parse, to_request

ROOT = Path(__file__).resolve().parents[2]
SOURCES = {name: ROOT / "examples" / "gpu-cluster" / name for name in demo.FILES}
SOURCES["pod-with-claims.yaml"] = ROOT / "examples" / "workloads" / "pod-with-claims.yaml"


def test_bundled_files_are_copies_of_the_examples() -> None:
    bundled = Path(demo.__file__).parent
    for name, source in SOURCES.items():
        assert (bundled / name).read_bytes() == source.read_bytes(), (
            f"webhook/demo/{name} differs from {source}"
        )


def test_the_demo_cluster_decodes_and_the_pod_is_the_review_object() -> None:
    state, pod = demo.split(demo.documents())
    loaded, problems = decode_documents(state)
    assert problems == []
    kinds = {doc.obj.kind for doc in loaded}
    assert kinds == {"DeviceClass", "Node", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate"}
    request = to_request(parse(json.dumps(demo.pod_review(pod)).encode()))
    assert request.kind == "Pod" and request.operation == "CREATE"
    assert request.obj is not None and request.obj.name == "inference" and request.namespace == "team-a"
