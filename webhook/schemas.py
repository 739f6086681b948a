"""The JSON Schemas of the documents draguard gives programs (:mod:`policies.outputs`), published in
the repository as ``schemas/<apiVersion>/<kind>.json`` (``schemas/draguard.io/v1alpha1/ValidateReport.json``),
every version of every kind: an older version stays selectable.

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
from policies.dryrun.answer import DryRunAnswer, DryRunAnswerV1alpha2, DryRunResponse
from policies.dryrun.headroom_answer import HeadroomAnswer, HeadroomResponse
from policies.outputs import AuditReport, TestReport, ValidateReport, ValidateReportV1alpha2

DOCUMENTS: tuple[type[BaseModel], ...] = (
    ValidateReport,
    ValidateReportV1alpha2,
    DryRunAnswer,
    DryRunAnswerV1alpha2,
    AuditReport,
    TestReport,
    DryRunResponse,
    DeviceAvailability,
    HeadroomAnswer,
    HeadroomResponse,
)
DIRECTORY = Path(__file__).resolve().parent.parent / "schemas"


def kind_of(model: type[BaseModel]) -> str:
    kind: str = model.model_fields["kind"].default
    return kind


def version_of(model: type[BaseModel]) -> str:
    version: str = model.model_fields["api_version"].default
    return version


def path(model: type[BaseModel], directory: Path = DIRECTORY) -> Path:
    """``<directory>/<apiVersion>/<kind>.json``."""
    return directory / version_of(model) / f"{kind_of(model)}.json"


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
    """The published files that differ from the models (or are missing), as ``<apiVersion>/<kind>``."""
    return [
        f"{version_of(model)}/{kind_of(model)}"
        for model in DOCUMENTS
        if not path(model, directory).is_file()
        or path(model, directory).read_text(encoding="utf-8") != text(model)
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m webhook.schemas", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only say which published files are stale")
    args = parser.parse_args(argv)
    if args.check:
        found = stale()
        for name in found:
            print(f"{DIRECTORY / name}.json: stale (run python -m webhook.schemas)", file=sys.stderr)
        return 1 if found else 0
    for model in DOCUMENTS:
        path(model).parent.mkdir(parents=True, exist_ok=True)
        path(model).write_text(text(model), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
