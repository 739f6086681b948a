"""The JSON Schemas of the documents draguard gives programs (:mod:`policies.outputs`), published in
the repository as ``schemas/draguard.io/v1alpha1/<kind>.json``.

Generated from the pydantic models in serialization mode (what is printed: camelCase, optional
fields left out when they do not apply), with ``apiVersion`` and ``kind`` required. Run
``python -m webhook.schemas`` after changing a model (``--check`` only compares);
``tests/test_output_schemas.py`` fails while the published files differ from the models, and
checks every command's output against them. A changed shape is a new version: see CHANGELOG.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from policies.availability.answer import DeviceAvailability
from policies.dryrun.answer import DryRunAnswer, DryRunResponse
from policies.dryrun.headroom_answer import HeadroomAnswer, HeadroomResponse
from policies.outputs import API_VERSION, AuditReport, TestReport, ValidateReport

DOCUMENTS: tuple[type[BaseModel], ...] = (
    ValidateReport,
    DryRunAnswer,
    AuditReport,
    TestReport,
    DryRunResponse,
    DeviceAvailability,
    HeadroomAnswer,
    HeadroomResponse,
)
DIRECTORY = Path(__file__).resolve().parent.parent / "schemas" / API_VERSION


def kind_of(model: type[BaseModel]) -> str:
    kind: str = model.model_fields["kind"].default
    return kind


def schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of one document."""
    found = model.model_json_schema(mode="serialization", by_alias=True)
    required = found.get("required", [])
    found["required"] = [
        "apiVersion",
        "kind",
        *(name for name in required if name not in ("apiVersion", "kind")),
    ]
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **found}


def text(model: type[BaseModel]) -> str:
    """The published file's content: indented, keys in the schema's order, a final newline."""
    return json.dumps(schema(model), indent=2) + "\n"


def stale(directory: Path = DIRECTORY) -> list[str]:
    """The published files that differ from the models (or are missing)."""
    return [
        kind_of(model)
        for model in DOCUMENTS
        if not (directory / f"{kind_of(model)}.json").is_file()
        or (directory / f"{kind_of(model)}.json").read_text(encoding="utf-8") != text(model)
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m webhook.schemas", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only say which published files are stale")
    args = parser.parse_args(argv)
    if args.check:
        found = stale()
        for kind in found:
            print(f"{DIRECTORY / kind}.json: stale (run python -m webhook.schemas)", file=sys.stderr)
        return 1 if found else 0
    DIRECTORY.mkdir(parents=True, exist_ok=True)
    for model in DOCUMENTS:
        (DIRECTORY / f"{kind_of(model)}.json").write_text(text(model), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
