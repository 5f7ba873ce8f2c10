"""Readable plans: a compact diff per definition event, inputs by name, downstream impact, bounded markdown.

JVM-free. Each event kind is planned by the real planner (``make_plan`` over a chain view holding the
events an apply of the old manifest leaves) and rendered as text, markdown and JSON; the downstream and
1,000-dataset checks plan real projects in temporary folders.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bench.bench_plan import generate
from odfproj.odf import model
from odfproj.odf.arrow_schema import encode_arrow_schema
from odfproj.odf.yaml_codec import parse_manifest
from odfproj.plan.diff import ChainView, normalise
from odfproj.plan.model import Action, AppendDefinitions, EventChange, Plan
from odfproj.plan.planfile import plan_from_data, plan_schema, plan_to_data
from odfproj.plan.planner import DesiredDataset, make_plan
from odfproj.plan.render import GITHUB_COMMENT_LIMIT, render_markdown, render_text
from odfproj.plan.sources import PlanRequest, plan_project
from odfproj.project.config import load_project
from odfproj.run.apply import apply_plan
from odfproj.storage.workspace import Workspace
from tests import manifests

NAME = "org.example.a"
A_ID = "did:odf:fed01aa3bd7ea6d7f2ed14fa1af3eb4d61bd6c3b3bb3a1b7f0e6b6b6ad1c1b1e1c1b1"
ROOT_ID = "did:odf:fed012e6fcce36701dc791488e0d0b1745cc1e33a4c1c9fcc41c63bd343dbbe0970e6"
OTHER_ID = "did:odf:fed01d9a8e6b6f1f0c2e4a7b5c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1"
HEAD = "f1620aa"
SOURCE = {
    "kind": "SetPollingSource",
    "fetch": {"kind": "FilesGlob", "path": "data/a/*.csv"},
    "read": {"kind": "Csv", "header": True, "schema": ["id BIGINT", "name STRING"]},
    "merge": {"kind": "Ledger", "primaryKey": ["id"]},
}
PUSH = {
    "kind": "AddPushSource",
    "sourceName": "orders",
    "read": {"kind": "NdJson", "schema": ["id BIGINT"]},
    "merge": {"kind": "Append"},
}
QUERY = "SELECT\n  id,\n  name\nFROM r\n"


def transform(query: str = QUERY, ref: str = "org.example.root") -> dict[str, Any]:
    return {
        "kind": "SetTransform",
        "inputs": [{"datasetRef": ref, "alias": "r"}],
        "transform": {"kind": "Sql", "engine": "spark", "query": query},
    }


def data_schema(*columns: tuple[str, pa.DataType]) -> dict[str, Any]:
    schema = encode_arrow_schema(pa.schema([pa.field(n, t) for n, t in columns]))
    return {"kind": "SetDataSchema", "schema": base64.b64encode(schema).decode()}


def attachments(content: str) -> dict[str, Any]:
    item = {"path": "README.md", "content": content}
    return {"kind": "SetAttachments", "attachments": {"kind": "Embedded", "items": [item]}}


def license_(name: str = "Creative Commons Attribution 4.0") -> dict[str, Any]:
    return {"kind": "SetLicense", "shortName": "CC-BY-4.0", "name": name, "websiteUrl": "https://cc.org"}


def snapshot(kind: str, events: list[dict[str, Any]]) -> model.DatasetSnapshot:
    return parse_manifest(manifests.snapshot(NAME, kind, events))[0]


def plan_update(kind: str, before: list[dict[str, Any]], after: list[dict[str, Any]]) -> Plan:
    """The plan that takes a chain holding ``before``'s events (as apply wrote them) to ``after``."""
    views = {
        "org.example.root": ChainView(ROOT_ID, model.DatasetKind.Root, HEAD, False, ()),
        "org.example.other": ChainView(OTHER_ID, model.DatasetKind.Root, HEAD, False, ()),
    }
    resolve = {name: view.dataset_id for name, view in views.items()}.get
    old = snapshot(kind, before)
    chain = tuple(normalise(e, resolve)[0] for e in old.metadata)
    views[NAME] = ChainView(A_ID, old.kind, HEAD, False, chain)
    desired = [DesiredDataset("datasets/a.yaml", snapshot(kind, after))]
    return make_plan(project="p", workspace="/w", desired=desired, views=views)


def in_markdown(line: str, markdown: str) -> bool:
    """``line`` of the text form is in the markdown's diff, its +/- marker moved to column 0."""
    stripped = line.lstrip()
    if stripped[:2] in ("+ ", "- "):
        pattern = rf"^{re.escape(stripped[0])} +{re.escape(stripped[2:])}$"
    else:
        pattern = rf"^ +{re.escape(stripped)}$"
    return re.search(pattern, markdown, re.MULTILINE) is not None


CASES = {
    "SetInfo": (
        "Root",
        [SOURCE, manifests.set_info("a", ("x", "y"))],
        [SOURCE, manifests.set_info("b", ("x", "z", "w"))],
        [
            '~ SetInfo.description: "a" -> "b"',
            '~ SetInfo.keywords[1]: "y" -> "z"',
            '+ SetInfo.keywords[2]: "w"',
        ],
    ),
    "SetInfo with long values": (
        "Root",
        [SOURCE, manifests.set_info("Daily weather observations in Seattle and New York (NOAA), 2012-2015.")],
        [SOURCE, manifests.set_info("Daily weather observations in Seattle and New York (NOAA), 2012-2016.")],
        [
            "~ SetInfo.description:",
            '    - "Daily weather observations in Seattle and New York (NOAA), 2012-2015."',
            '    + "Daily weather observations in Seattle and New York (NOAA), 2012-2016."',
        ],
    ),
    "SetLicense": (
        "Root",
        [SOURCE, license_()],
        [SOURCE, license_("CC BY 4.0")],
        ['~ SetLicense.name: "Creative Commons Attribution 4.0" -> "CC BY 4.0"'],
    ),
    "SetLicense removed": (
        "Root",
        [SOURCE, license_(), manifests.set_info("a")],
        [SOURCE, manifests.set_info("b")],
        ["- SetLicense", "    # cannot be removed from the chain; kept", '~ SetInfo.description: "a" -> "b"'],
    ),
    "SetVocab": (
        "Root",
        [SOURCE, {"kind": "SetVocab", "eventTimeColumn": "date"}],
        [SOURCE, {"kind": "SetVocab", "eventTimeColumn": "day"}],
        ['~ SetVocab.eventTimeColumn: "date" -> "day"'],
    ),
    "SetPollingSource": (
        "Root",
        [SOURCE],
        [
            {
                **SOURCE,
                "fetch": {"kind": "FilesGlob", "path": "data/b/*.csv"},
                "read": {**SOURCE["read"], "schema": ["id BIGINT", "name STRING", "price DOUBLE"]},
                "merge": {"kind": "Append"},
            }
        ],
        [
            '~ SetPollingSource.fetch.path: "data/a/*.csv" -> "data/b/*.csv"',
            '+ SetPollingSource.read.schema[2]: "price DOUBLE"',
            '~ SetPollingSource.merge.kind: "Ledger" -> "Append"',
            '- SetPollingSource.merge.primaryKey[0]: "id"',
        ],
    ),
    "SetPollingSource removed": (
        "Root",
        [SOURCE, PUSH],
        [PUSH],
        ["- SetPollingSource (appends DisablePollingSource)"],
    ),
    "AddPushSource": (
        "Root",
        [PUSH],
        [{**PUSH, "read": {"kind": "Csv", "header": True, "schema": ["id BIGINT"]}}],
        [
            '~ AddPushSource[orders].read.kind: "NdJson" -> "Csv"',
            "+ AddPushSource[orders].read.header: true",
        ],
    ),
    "AddPushSource removed": (
        "Root",
        [SOURCE, PUSH],
        [SOURCE],
        ["- AddPushSource[orders] (appends DisablePushSource)"],
    ),
    "SetTransform": (
        "Derivative",
        [transform()],
        [transform(QUERY.replace("  name\n", "  upper(name) AS name\n"), ref="org.example.other")],
        [
            '~ SetTransform.inputs[0].datasetRef: "org.example.root" -> "org.example.other"',
            "~ SetTransform.transform.queries[0].query:",
            "      @@ -2,3 +2,3 @@",
            "        id,",
            "    -   name",
            "    +   upper(name) AS name",
            "      FROM r",
        ],
    ),
    "SetAttachments": (
        "Root",
        [SOURCE, attachments("# A\n\nOld text.\n")],
        [SOURCE, attachments("# A\n\nNew text.\nMore.\n")],
        [
            "~ SetAttachments.attachments.items[0].content:",
            "    - Old text.",
            "    + New text.",
            "    + More.",
        ],
    ),
    "SetDataSchema": (
        "Root",
        [SOURCE, data_schema(("id", pa.int64()))],
        [SOURCE, data_schema(("id", pa.int64()), ("price", pa.float64()))],
        ['+ SetDataSchema.schema[1]: "price double"'],
    ),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_each_event_kind_is_shown_as_a_compact_diff(case: str) -> None:
    kind, before, after, expected = CASES[case]
    plan = plan_update(kind, before, after)
    [step] = [s for s in plan.definitions if s.dataset == NAME]
    assert step.action is Action.UPDATE, step
    text = render_text(plan)
    lines = text.splitlines()
    for line in expected:
        assert f"    {line}" in lines, f"{line!r} not in:\n{text}"
    assert "did:odf:" not in text
    assert not any(line.lstrip().startswith(("kind:", "description:", "query:")) for line in lines), text
    markdown = render_markdown(plan)
    for line in expected:
        assert in_markdown(line, markdown), f"{line!r} not in:\n{markdown}"
    assert "did:odf:" not in markdown
    data = plan_to_data(plan)
    jsonschema.validate(data, plan_schema())
    assert plan_from_data(json.loads(json.dumps(data))) == plan
    [json_step] = [s for s in data["steps"] if s["step"] == "append_definitions" and s["dataset"] == NAME]
    names = {n["dataset_id"]: n["name"] for n in json_step["input_names"]}
    assert names == (
        {ROOT_ID: "org.example.root", OTHER_ID: "org.example.other"} if kind == "Derivative" else {}
    )


def test_the_json_form_keeps_input_ids_and_adds_their_names() -> None:
    plan = plan_update("Derivative", [transform()], [transform(ref="org.example.other")])
    data = plan_to_data(plan)
    [step] = [s for s in data["steps"] if s["step"] == "append_definitions"]
    [change] = step["changes"]
    assert change["before"]["inputs"][0]["datasetRef"] == ROOT_ID
    assert change["event"]["inputs"][0]["datasetRef"] == OTHER_ID
    assert step["input_names"] == [
        {"dataset_id": ROOT_ID, "name": "org.example.root"},
        {"dataset_id": OTHER_ID, "name": "org.example.other"},
    ]
    # A plan file written before the two fields existed (same format version) still loads.
    for field in ("input_names", "downstream"):
        del step[field]
    [older] = plan_from_data(data).definitions
    assert older.input_names == () and older.downstream == ()


def test_a_created_dataset_is_summarised_not_dumped() -> None:
    events = [
        SOURCE,
        PUSH,
        {"kind": "SetVocab", "eventTimeColumn": "date"},
        manifests.set_info("Prices of things, " * 10, ("prices", "example")),
        license_(),
        attachments("# A\n\nText.\n"),
        data_schema(("id", pa.int64()), ("name", pa.string())),
    ]
    plan = make_plan(
        project="p",
        workspace="/w",
        desired=[DesiredDataset("datasets/a.yaml", snapshot("Root", events))],
        views={},
    )
    text = render_text(plan)
    body = text.split(f"+ {NAME} [Root]  (datasets/a.yaml)\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert body == [
        "    + Seed (a new dataset id and key)",
        '    + SetPollingSource: fetch FilesGlob "data/a/*.csv"; read Csv (2 columns); merge Ledger by id',
        "    + AddPushSource[orders]: source orders; read NdJson (1 column); merge Append",
        '    + SetVocab: eventTimeColumn "date"',
        '    + SetInfo: description "Prices of things, Prices of things, Prices of things, Pri..."; '
        "keywords prices, example",
        "    + SetLicense: CC-BY-4.0 (Creative Commons Attribution 4.0)",
        "    + SetAttachments: 1 attachment: README.md",
        "    + SetDataSchema: 2 columns: id int64, name string",
    ]
    derived = snapshot("Derivative", [transform()])
    views = {"org.example.root": ChainView(ROOT_ID, model.DatasetKind.Root, HEAD, False, ())}
    plan = make_plan(project="p", workspace="/w", desired=[DesiredDataset("d.yaml", derived)], views=views)
    assert (
        "    + SetTransform: input org.example.root as r; Sql (spark), 1 query of 4 lines\n"
        in render_text(plan)
    )


# -- downstream impact, on a real project ------------------------------------------------------------


def make_project(root: Path) -> Path:
    """a <- b <- c <- d, and a <- e: a query change of b recomputes c and d, not e."""
    (root / "datasets").mkdir(parents=True)
    (root / "odfproj.yaml").write_text("name: impact\n")
    files = {
        "a": manifests.root("a", path="data/a/*.csv", schema=("id BIGINT",), extra=[manifests.set_info("A")]),
        "b": manifests.derivative("b", ["a"], "SELECT id FROM a"),
        "c": manifests.derivative("c", ["b"], "SELECT id FROM b"),
        "d": manifests.derivative("d", ["c"], "SELECT id FROM c"),
        "e": manifests.derivative("e", {"a": "a"}, "SELECT id FROM a"),
    }
    for name, text in files.items():
        (root / "datasets" / f"{name}.yaml").write_text(text)
    return root


def plan_of(root: Path, request: PlanRequest | None = None) -> Plan:
    return plan_project(load_project(root), request or PlanRequest())[0]


def edit(root: Path, name: str, old: str, new: str) -> None:
    path = root / "datasets" / f"{name}.yaml"
    path.write_text(path.read_text().replace(old, new))


@pytest.fixture(scope="module")
def applied(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_project(tmp_path_factory.mktemp("impact") / "proj")
    workspace = Workspace(load_project(root).workspace())
    with workspace.lock():
        apply_plan(plan_of(root), workspace)
    return root


def test_a_changed_query_names_the_downstream_datasets_run_recomputes(applied: Path) -> None:
    edit(applied, "b", "SELECT id FROM a", "SELECT id * 2 AS id FROM a")
    edit(applied, "a", "description: A", "description: All of A")
    try:
        plan = plan_of(applied)
        steps = {s.dataset: s for s in plan.definitions}
        assert steps["b"].recomputes and steps["b"].downstream == ("c", "d")
        assert not steps["a"].recomputes and steps["a"].downstream == ()  # a description recomputes nothing
        text = render_text(plan)
        assert (
            "    # run recomputes this dataset from its inputs; 2 downstream datasets will be recomputed (c, d)\n"
            in text
        )
        assert text.count("will be recomputed") == 1
        assert "  transform b\n    # recomputes its whole state: its query changed\n    # input a:" in text
        assert text.count("recomputes its whole state") == 1
        markdown = render_markdown(plan)
        assert "| `~` | `b` | update | `datasets/b.yaml` | SetTransform | 2 |" in markdown
        assert "| `~` | `a` | update | `datasets/a.yaml` | SetInfo | - |" in markdown
        assert "2 downstream datasets will be recomputed (c, d)" in markdown
        [json_b] = [
            s for s in plan_to_data(plan)["steps"] if s.get("action") == "update" and s["dataset"] == "b"
        ]
        assert json_b["downstream"] == ["c", "d"]
        assert json_b["input_names"] == [{"dataset_id": json_b["changes"][0]["before"]["inputs"][0]["datasetRef"],
                                          "name": "a"}]  # fmt: skip

        # Run recomputes only what the plan selects: alone, b recomputes nothing downstream.
        [alone] = plan_of(applied, PlanRequest(select=("b",))).definitions
        assert alone.recomputes and alone.downstream == ()
        assert "no downstream dataset will be recomputed" in render_text(
            plan_of(applied, PlanRequest(select=("b",)))
        )
    finally:
        edit(applied, "b", "SELECT id * 2 AS id FROM a", "SELECT id FROM a")
        edit(applied, "a", "description: All of A", "description: A")


def test_inputs_are_named_in_the_data_steps_even_when_a_manifest_gives_an_id(applied: Path) -> None:
    a_id = Workspace(load_project(applied).workspace()).open("a").projection().dataset_id.as_did_str()
    edit(applied, "e", "datasetRef: a", f"datasetRef: {a_id}")
    try:
        text = render_text(plan_of(applied))
        assert "  transform e\n    # input a: no data yet\n" in text and "did:odf" not in text
    finally:
        edit(applied, "e", f"datasetRef: {a_id}", "datasetRef: a")


# -- the markdown form stays under GitHub's comment limit -----------------------------------------


def test_markdown_of_1000_changed_datasets_fits_a_comment_and_names_every_refusal(tmp_path: Path) -> None:
    """bench_plan's 1,000-manifest project, all created; every 40th derivative's query is refused."""
    root = tmp_path / "bench"
    generate(root, 1000)
    refused = []
    for index, path in enumerate(sorted((root / "datasets").glob("*.yaml"))):
        text = path.read_text()
        if "kind: Derivative" in text and index % 40 == 0:
            path.write_text(text.replace("engine: spark", "engine: postgres"))
            refused.append(path.stem)
    plan = plan_of(root)
    assert {s.dataset for s in plan.definitions if s.action is Action.REFUSED} == set(refused)
    assert plan.count(Action.CREATE) == 1000 - len(refused)
    markdown = render_markdown(plan)
    assert len(markdown) <= GITHUB_COMMENT_LIMIT
    caution = markdown.split("> [!CAUTION]", 1)[1].split("\n\n", 1)[0]
    assert markdown.index("> [!CAUTION]") < markdown.index("| dataset |")
    for name in refused:
        assert f"`{name}`" in caution
    assert_well_formed(markdown)
    assert re.search(r"^\.\.\. and \d+ more dataset\(s\) \(\d+ create\) not listed", markdown, re.MULTILINE)
    assert re.search(r"^Details of \d+ dataset\(s\) are left out", markdown, re.MULTILINE)


def test_markdown_names_every_refusal_when_their_reasons_do_not_fit() -> None:
    reason = "the query cannot run: " + "a long reason " * 40
    steps = tuple(
        AppendDefinitions(f"org.example.ds{i:04d}", Action.REFUSED, f"datasets/ds{i:04d}.yaml", "Root", reasons=(reason,))
        for i in range(1000)
    )  # fmt: skip
    markdown = render_markdown(Plan(project="p", workspace="/w", steps=steps))
    assert len(markdown) <= GITHUB_COMMENT_LIMIT
    for i in range(1000):
        assert f"`org.example.ds{i:04d}`" in markdown
    assert "(reasons in `odfproj plan`; too many to list here)" in markdown
    assert_well_formed(markdown)


TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=400)


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    """Plans of any size and shape: long reasons, multi-line values, backticks and pipes in file names."""
    steps = []
    for i in range(draw(st.integers(0, 300))):
        action = draw(st.sampled_from(Action))
        before, after = draw(TEXT), draw(TEXT)
        changes = (
            EventChange("SetInfo", "SetInfo", {"description": before}, {"description": after}, {"d": after}),
        )
        steps.append(
            AppendDefinitions(
                f"org.example.d{i}",
                action,
                draw(st.one_of(st.none(), TEXT)),
                "Root",
                changes=changes if action is not Action.REFUSED else (),
                reasons=tuple(draw(st.lists(TEXT, max_size=3))) if action is Action.REFUSED else (),
            )
        )
    return Plan(project=draw(TEXT), workspace="/w", steps=tuple(steps), warnings=tuple(draw(st.lists(TEXT))))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=plans(), limit=st.integers(6_000, GITHUB_COMMENT_LIMIT))
@example(  # found by CI: a refused dataset without a reason is still named
    plan=Plan(
        project="p",
        workspace="/w",
        steps=(AppendDefinitions("org.example.d191", Action.REFUSED, None, "Root"),),
    ),
    limit=6_000,
)
@example(  # found by CI: a manifest path that reads as a closing tag stays text inside its code span
    plan=Plan(
        project="p",
        workspace="/w",
        steps=(AppendDefinitions("org.example.d3", Action.REFUSED, "</details>", "Root", reasons=("bad",)),),
    ),
    limit=6_000,
)
def test_markdown_of_any_plan_stays_under_its_limit_in_whole_pieces(plan: Plan, limit: int) -> None:
    markdown = render_markdown(plan, limit=limit, show_unchanged=True)
    assert len(markdown) <= limit
    assert_well_formed(markdown, table=bool(plan.definitions))
    refused = [s for s in plan.definitions if s.action is Action.REFUSED]
    if sum(len(s.dataset) + len(s.manifest or "") + 20 for s in refused) < limit // 4:
        assert all(f"`{s.dataset}`" in markdown for s in refused)


def assert_well_formed(markdown: str, *, table: bool = True) -> None:
    """Whole blocks only: every code fence and <details> is closed, every table row complete.

    Lines end as CommonMark ends them (``\\n``, ``\\r\\n``, ``\\r``); a fence closes only at a line of
    backticks at least as long as it, which no line inside may be (a reason may hold backticks)."""
    # Outside code spans: a value shown in one (a manifest path "</details>") is text, not a tag.
    tags = re.sub(r"(`+)(?:(?!\1).)+?\1", "", markdown)
    assert tags.count("<details>") == tags.count("</details>")
    fence, rows = None, []
    for line in re.split(r"\r\n|\r|\n", markdown):
        if fence is None:
            opener = re.match(r"`{3,}", line)
            fence = opener.group(0) if opener else None
            if line.startswith("| "):
                rows.append(line)
        elif set(line.strip(" ")) == {"`"} and len(line.strip(" ")) >= len(fence):
            assert line == fence, f"{line!r} closes {fence!r} from inside the block"
            fence = None
    assert fence is None, "a code fence is left open"
    assert all(line.endswith(" |") for line in rows) and (bool(rows) or not table)
