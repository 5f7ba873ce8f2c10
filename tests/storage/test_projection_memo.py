"""Handles of one workspace share the projections they parse, and never serve one for another head."""

from __future__ import annotations

from odfproj.odf import model
from odfproj.storage.workspace import Workspace
from tests.storage.helpers.chains import Writer


def test_a_second_handle_reuses_the_parsed_projection_of_the_same_head(
    workspace: Workspace, writer: Writer
) -> None:
    writer.add_data(3)
    first = workspace.open("root").projection()
    workspace.open("root").layout.projection_cache.write_text("not json")  # would be rebuilt if read
    assert workspace.open("root").projection() is first
    assert Workspace(workspace.root).open("root").projection() is not first  # another workspace parses


def test_a_moved_head_is_folded_again_whichever_handle_moved_it(workspace: Workspace, writer: Writer) -> None:
    reader = workspace.open("root")
    before = reader.projection()
    writer.add_data(2)  # through another handle
    after = reader.projection()
    assert after.head != before.head and after.last_offset == 1
    workspace.open("root").append([model.SetInfo(description="later")])
    assert workspace.open("root").projection().set_info == model.SetInfo(description="later")
    assert reader.projection().set_info == model.SetInfo(description="later")
