"""The planner's classification rules, on model objects (no workspace, no JVM)."""

from __future__ import annotations

from dataclasses import replace

from odfproj.odf import model
from odfproj.odf.yaml_codec import parse_manifest
from odfproj.plan.diff import ChainView, diff_dataset, normalise
from odfproj.plan.model import Action

ROOT = """
kind: DatasetSnapshot
version: 1
content:
  name: org.example.root
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch: {kind: FilesGlob, path: "data/*.csv"}
      read: {kind: Csv, header: true, schema: ["id BIGINT", "name STRING", "price DOUBLE"]}
      merge: {kind: Ledger, primaryKey: [id]}
    - kind: SetInfo
      description: Prices.
      keywords: [prices]
    - kind: SetVocab
      eventTimeColumn: date
"""

DERIVED = """
kind: DatasetSnapshot
version: 1
content:
  name: org.example.derived
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs: [{datasetRef: org.example.root, alias: r}]
      transform: {kind: Sql, engine: spark, query: "SELECT id, price FROM r"}
"""

ROOT_ID = "did:odf:fed012e6fcce36701dc791488e0d0b1745cc1e33a4c1c9fcc41c63bd343dbbe0970e6"


def snapshot(text: str) -> model.DatasetSnapshot:
    return parse_manifest(text)[0]


def resolve(name: str) -> str | None:
    return ROOT_ID if name.lower() == "org.example.root" else None


def applied(snap: model.DatasetSnapshot, *, has_data: bool = False) -> ChainView:
    """The chain state an apply of ``snap`` leaves behind."""
    events = tuple(normalise(e, resolve)[0] for e in snap.metadata)
    return ChainView("did:odf:x", snap.kind, "f1620aa", has_data, events)


def test_new_dataset_is_created_with_all_its_events() -> None:
    step = diff_dataset(snapshot(ROOT), "a.yaml", None, resolve)
    assert step.action is Action.CREATE
    assert [c.kind for c in step.changes] == ["SetPollingSource", "SetInfo", "SetVocab"]


def test_unchanged_manifest_appends_nothing() -> None:
    snap = snapshot(ROOT)
    step = diff_dataset(snap, "a.yaml", applied(snap), resolve)
    assert step.action is Action.UNCHANGED
    assert step.changes == ()


def test_reordered_but_equal_manifest_appends_nothing() -> None:
    snap = snapshot(ROOT)
    reordered = replace(snap, metadata=tuple(reversed(snap.metadata)))
    assert diff_dataset(reordered, "a.yaml", applied(snap), resolve).action is Action.UNCHANGED


def test_description_change_appends_exactly_one_set_info() -> None:
    snap = snapshot(ROOT)
    edited = snapshot(ROOT.replace("description: Prices.", "description: Daily prices."))
    step = diff_dataset(edited, "a.yaml", applied(snap), resolve)
    assert step.action is Action.UPDATE
    assert [c.kind for c in step.changes] == ["SetInfo"]
    assert step.changes[0].event["description"] == "Daily prices."


def test_query_change_appends_one_set_transform() -> None:
    """The diff alone cannot judge a query (plan.queries asks the engine; see test_query_evolution)."""
    snap = snapshot(DERIVED)
    edited = snapshot(DERIVED.replace("SELECT id, price FROM r", "SELECT id, price * 2 AS price FROM r"))
    step = diff_dataset(edited, "d.yaml", applied(snap), resolve)
    assert step.action is Action.UPDATE
    assert [c.kind for c in step.changes] == ["SetTransform"]
    assert step.output_schema is None


def test_inputs_are_stored_as_dataset_ids_and_query_as_queries() -> None:
    step = diff_dataset(snapshot(DERIVED), "d.yaml", None, resolve)
    event = step.changes[0].event
    assert event["inputs"] == [{"datasetRef": ROOT_ID, "alias": "r"}]
    assert "query" not in event["transform"]
    assert event["transform"]["queries"] == [{"query": "SELECT id, price FROM r"}]


def test_unknown_input_ids_are_pending_until_apply() -> None:
    step = diff_dataset(snapshot(DERIVED), "d.yaml", None, lambda name: None)
    assert step.pending_inputs == ("org.example.root",)


def test_removing_a_read_column_is_refused() -> None:
    snap = snapshot(ROOT)
    edited = snapshot(ROOT.replace(', "price DOUBLE"', ""))
    step = diff_dataset(edited, "a.yaml", applied(snap), resolve)
    assert step.action is Action.REFUSED
    assert any("removes or renames column 'price'" in r for r in step.reasons)


def test_retyping_a_read_column_is_refused_and_adding_one_is_allowed() -> None:
    snap = snapshot(ROOT)
    retyped = snapshot(ROOT.replace('"price DOUBLE"', '"price STRING"'))
    assert diff_dataset(retyped, "a.yaml", applied(snap), resolve).action is Action.REFUSED
    added = snapshot(ROOT.replace('"price DOUBLE"', '"price DOUBLE", "qty INT"'))
    assert diff_dataset(added, "a.yaml", applied(snap, has_data=True), resolve).action is Action.UPDATE


def test_merge_strategy_change_is_refused_only_once_there_is_data() -> None:
    snap = snapshot(ROOT)
    edited = snapshot(ROOT.replace("{kind: Ledger, primaryKey: [id]}", "{kind: Append}"))
    assert diff_dataset(edited, "a.yaml", applied(snap, has_data=False), resolve).action is Action.UPDATE
    step = diff_dataset(edited, "a.yaml", applied(snap, has_data=True), resolve)
    assert step.action is Action.REFUSED
    assert "merge strategy changes from Ledger(id) to Append" in step.reasons[0]


def test_kind_change_is_refused() -> None:
    snap = snapshot(ROOT)
    view = replace(applied(snap), kind=model.DatasetKind.Derivative)
    step = diff_dataset(snap, "a.yaml", view, resolve)
    assert step.action is Action.REFUSED
    assert "cannot change kind" in step.reasons[0]


def test_removed_polling_source_is_disabled() -> None:
    snap = snapshot(ROOT)
    edited = replace(snap, metadata=snap.metadata[1:])
    step = diff_dataset(edited, "a.yaml", applied(snap), resolve)
    assert step.action is Action.UPDATE
    assert [c.kind for c in step.changes] == ["DisablePollingSource"]


def test_chain_changed_behind_the_projects_back_is_drift() -> None:
    snap = snapshot(ROOT)
    view = applied(snap)
    tampered = replace(
        view,
        definition_events=(*view.definition_events, model.SetInfo(description="hacked")),
        foreign_events=("SetInfo (block 4)",),
    )
    step = diff_dataset(snap, "a.yaml", tampered, resolve)
    assert step.action is Action.DRIFT
    assert step.changes[0].before["description"] == "hacked"
    assert "SetInfo (block 4)" in step.reasons[0]


def test_manifest_edit_without_foreign_events_is_an_update() -> None:
    snap = snapshot(ROOT)
    view = replace(
        applied(snap), definition_events=(*applied(snap).definition_events, model.SetInfo(description="old"))
    )
    assert diff_dataset(snap, "a.yaml", view, resolve).action is Action.UPDATE
