"""``odfproj destroy``: delete datasets from the workspace, terraform-style, after saying what reads them.

Two kinds of dataset can be destroyed: *orphans* (in the workspace, but no manifest defines them any
more: ``plan`` reports them and nothing else ever removes them) and datasets the user names with
selectors. A destroyed dataset takes everything of its own along: its folder (chain, data,
checkpoints, the projection cache and the state index live in it), its ``.names/`` record and its
private key in ``keys/``. The folder goes first, atomically (:meth:`Workspace.delete`), the key last,
so an interruption can at worst leave a key without a dataset, never a dataset without its key.

The chain is append-only and a deletion cannot be undone; that is why :func:`destroy_plan` is a
separate, read-only step that a caller shows (and asks about) before :func:`destroy` deletes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from odfproj.errors import OdfprojError
from odfproj.project.config import ProjectConfig
from odfproj.project.graph import DatasetGraph
from odfproj.project.manifests import load_manifests
from odfproj.project.selectors import select
from odfproj.storage.workspace import Workspace

__all__ = ["DestroyError", "DestroyPlan", "Doomed", "destroy", "destroy_plan"]


class DestroyError(OdfprojError):
    """Nothing to destroy, or a selector that names no dataset of the workspace."""


@dataclass(frozen=True)
class Doomed:
    """One dataset to delete and what it leaves behind."""

    name: str
    dataset_id: str
    orphan: bool
    """No manifest defines it (otherwise the next run creates it again, with a new id)."""
    readers: tuple[str, ...]
    """Datasets that read it (manifests naming it, or chains consuming it) and are not destroyed too."""


@dataclass(frozen=True)
class DestroyPlan:
    workspace: Path
    datasets: tuple[Doomed, ...]

    def describe(self) -> list[str]:
        """The lines to show before asking: each dataset, why it goes, and who will miss it."""
        lines = []
        for doomed in self.datasets:
            why = (
                "orphan: no manifest defines it"
                if doomed.orphan
                else "a manifest still defines it: the next run creates it anew, with a new id"
            )
            lines.append(f"- {doomed.name} ({why})")
            if doomed.readers:
                lines.append(
                    f"    read by {', '.join(doomed.readers)}: they will fail to update until it exists again"
                )
        return lines


def destroy_plan(
    config: ProjectConfig, selectors: Sequence[str] = (), *, orphans: bool = False, target: str | None = None
) -> DestroyPlan:
    """What ``destroy`` would delete: the orphans (``orphans=True``) and the datasets ``selectors`` name.

    A selector is the grammar of ``--select`` over the project's datasets; a plain name may also name
    an orphan. A dataset odfproj.yaml's ``moved:`` list renames (not yet applied) is not an orphan.
    Reads only.
    """
    if not selectors and not orphans:
        raise DestroyError("name the datasets to destroy (selectors), or pass --orphans")
    root = config.workspace(target)
    workspace = Workspace(root)
    existing = {n.lower(): n for n in workspace.list_datasets()}
    ids = {name: workspace.open(name, recover=False).projection().dataset_id for name in existing.values()}
    manifests = load_manifests(config, target=target)
    graph = DatasetGraph.build(manifests, known_ids={i.as_did_str(): n for n, i in ids.items()})
    defined = {n.lower() for n in graph.datasets}
    chosen: dict[str, str] = {}
    if orphans:
        # A dataset odfproj.yaml declares renamed (moved:) is no orphan: the next apply renames it.
        pending = {m.source.lower() for m in config.moves if m.target.lower() not in existing}
        chosen.update((k, n) for k, n in existing.items() if k not in defined and k not in pending)
    managed = [s for s in selectors if s.lower() not in existing or s.lower() in defined]
    for name in (s for s in selectors if s.lower() in existing and s.lower() not in defined):
        chosen[name.lower()] = existing[name.lower()]  # an orphan named outright
    if managed:
        selection = select(graph, manifests, select=managed)
        missing = [n for n in selection.names if n.lower() not in existing]
        chosen.update((n.lower(), existing[n.lower()]) for n in selection.names if n.lower() in existing)
        if not chosen and (missing or selection.warnings):
            raise DestroyError(
                "nothing to destroy: "
                + "; ".join([*selection.warnings, *(f"{n} is not in the workspace {root}" for n in missing)])
            )
    if not chosen:
        raise DestroyError(f"nothing to destroy: the workspace {root} holds no such dataset")
    consumed = {name: _consumed_ids(workspace, name) for name in ids}
    result = []
    for key, name in sorted(chosen.items()):
        readers = set()
        if name in graph:
            readers |= {r for r in graph.graph.successors(graph.canonical(name)) if r.lower() not in chosen}
        readers |= {o for o in ids if o.lower() not in chosen and ids[name].as_did_str() in consumed[o]}
        result.append(
            Doomed(name, ids[name].as_did_str(), key not in defined, tuple(sorted(readers, key=str.lower)))
        )
    return DestroyPlan(root, tuple(result))


def _consumed_ids(workspace: Workspace, name: str) -> set[str]:
    """The ``did:odf`` of every input a workspace chain declares or has consumed."""
    projection = workspace.open(name, recover=False).projection()
    found = {i.as_did_str() for i in projection.inputs}
    if projection.set_transform is not None:
        found |= {i.dataset_ref for i in projection.set_transform.inputs}
    return found


def destroy(plan: DestroyPlan, *, lock_timeout: float | None = None) -> list[str]:
    """Delete every dataset of ``plan`` with its name record and key, under the workspace lock."""
    workspace = Workspace(plan.workspace)
    deleted = []
    with workspace.lock(purpose="odfproj destroy", timeout=lock_timeout):
        for doomed in plan.datasets:
            if not workspace.exists(doomed.name):
                continue  # gone meanwhile: nothing left to do
            dataset_id = workspace.open(doomed.name, recover=False).projection().dataset_id
            if dataset_id.as_did_str() != doomed.dataset_id:
                raise DestroyError(
                    f"dataset {doomed.name} was replaced since it was shown (another id); nothing more was deleted"
                )
            workspace.delete(doomed.name)
            workspace.key_path(dataset_id).unlink(missing_ok=True)
            deleted.append(doomed.name)
    return deleted
