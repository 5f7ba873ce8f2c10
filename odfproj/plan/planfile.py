"""Plans as JSON: the ``--format json`` output and the file ``plan --out`` saves for ``apply FILE``.

One form for both, documented by ``schemas/plan.schema.json``. A saved plan is pinned to the head of
every dataset it was made against (``expected_head``), so applying it later does exactly what was
reviewed or nothing at all.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from odfproj import __version__
from odfproj.errors import PlanError
from odfproj.plan.model import (
    PLAN_FORMAT_VERSION,
    Action,
    AppendDefinitions,
    EventChange,
    Ingest,
    InputName,
    LastRun,
    OutputSchema,
    Plan,
    RenameDataset,
    Step,
    Transform,
    TransformInput,
)

#: The ``step`` tag of each kind of step in the JSON form.
STEP_TAGS: dict[type, str] = {
    RenameDataset: "rename",
    AppendDefinitions: "append_definitions",
    Ingest: "ingest",
    Transform: "transform",
}


def plan_to_data(plan: Plan) -> dict[str, Any]:
    """The plan as JSON-ready data (lists, not tuples), in the form the schema documents."""
    data = _jsonable(asdict(plan))
    data["steps"] = [{"step": STEP_TAGS[type(s)], **_jsonable(asdict(s))} for s in plan.steps]
    data["odfproj_version"] = __version__
    data["counts"] = {a.value: plan.count(a) for a in Action}
    data["counts"]["rename"] = sum(1 for r in plan.renames if not r.refused)
    data["summary"] = plan.summary()
    return data


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, Action):
        return value.value
    return value


def plan_to_json(plan: Plan) -> str:
    return json.dumps(plan_to_data(plan), indent=2) + "\n"


@cache
def plan_schema() -> dict[str, Any]:
    path = resources.files("odfproj") / "resources" / "schemas" / "plan.schema.json"
    return json.loads(path.read_text(encoding="utf-8"))


def plan_from_data(data: Any, source: str = "plan") -> Plan:
    """Rebuild a plan from its JSON form; anything that does not follow the schema is a PlanError."""
    if isinstance(data, dict) and data.get("format_version") != PLAN_FORMAT_VERSION:
        raise PlanError(
            f"{source}: plan format version {data.get('format_version')!r} is not supported "
            f"(this odfproj writes and reads version {PLAN_FORMAT_VERSION}); make the plan again"
        )
    # Imported here: only reading a plan file validates one; writing a plan (every `plan`) needs no jsonschema.
    import jsonschema

    errors = sorted(jsonschema.Draft202012Validator(plan_schema()).iter_errors(data), key=lambda e: e.path)
    if errors:
        first = errors[0]
        where = "/".join(str(p) for p in first.absolute_path) or "(top)"
        message = first.message if len(first.message) <= 160 else first.message[:157] + "..."
        raise PlanError(f"{source}: not a valid plan file: at {where}: {message}")
    steps = tuple(_step_from_data(s) for s in data["steps"])
    return Plan(
        project=data["project"],
        workspace=data["workspace"],
        steps=steps,
        warnings=tuple(data["warnings"]),
        created_at=data["created_at"],
        format_version=data["format_version"],
    )


def _step_from_data(s: dict[str, Any]) -> Step:
    """One step of a schema-valid plan."""
    if s["step"] == "ingest":
        return Ingest(
            s["dataset"],
            s["manifest"],
            s["fetch"],
            s["source"],
            tuple(s["files"]),
            tuple(s["notes"]),
            tuple(s["warnings"]),
        )
    if s["step"] == "rename":
        return RenameDataset(
            s["source"],
            s["dataset"],
            s["declared_in"],
            s["manifest"],
            s["dataset_id"],
            s["expected_head"],
            tuple(s["reasons"]),
        )
    if s["step"] == "transform":
        inputs = tuple(
            TransformInput(i["name"], i["dataset_id"], i["last_offset"], i["consumed"]) for i in s["inputs"]
        )
        last = s.get("last_run")
        last_run = LastRun(last["mode"], last["path"], last.get("why_full", "")) if last else None
        return Transform(s["dataset"], s["manifest"], inputs, s.get("mode"), last_run, s.get("hint"))
    return AppendDefinitions(
        dataset=s["dataset"],
        action=Action(s["action"]),
        manifest=s["manifest"],
        kind=s["kind"],
        changes=tuple(
            EventChange(c["key"], c["kind"], c["before"], c["after"], c["event"], tuple(c["notes"]))
            for c in s["changes"]
        ),
        reasons=tuple(s["reasons"]),
        expected_head=s["expected_head"],
        pending_inputs=tuple(s["pending_inputs"]),
        output_schema=_output_schema(s.get("output_schema")),
        input_names=tuple(InputName(i["dataset_id"], i["name"]) for i in s.get("input_names", ())),
        downstream=tuple(s.get("downstream", ())),
    )


def _output_schema(data: dict[str, Any] | None) -> OutputSchema | None:
    if data is None:
        return None
    before, after = data["before"], data["after"]
    return OutputSchema(
        tuple(before) if before is not None else None, tuple(after) if after is not None else None
    )


def write_plan_file(plan: Plan, path: Path, redact: Callable[[str], str] | None = None) -> None:
    """Save ``plan``; ``redact`` removes secret values from the text (a plan file is a CI artifact)."""
    text = plan_to_json(plan)
    try:
        path.write_text(redact(text) if redact else text, encoding="utf-8")
    except OSError as e:
        raise PlanError(f"cannot write plan file {path}: {e.strerror}") from None


def read_plan_file(path: Path) -> Plan:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PlanError(f"plan file {path} not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise PlanError(f"cannot read plan file {path}: {e}") from None
    try:
        data = json.loads(text)
    except ValueError as e:
        raise PlanError(f"{path}: not a plan file (invalid JSON: {e})") from None
    except RecursionError:
        raise PlanError(f"{path}: not a plan file (JSON nested too deeply)") from None
    return plan_from_data(data, str(path))
