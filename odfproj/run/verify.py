"""``verify`` over a workspace: chains, files and identities, and optionally re-executed transforms.

Reproducing a derivative is worth doing only when its chain and files are sound (a broken chain would
fail in confusing ways), and reproducing proves the recorded hashes while re-hashing the files proves the
stored data is that data: hence the order, and ``integrity`` implied by ``engine``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from odfproj.odf import model
from odfproj.storage.verify import check_in_workspace
from odfproj.storage.workspace import Workspace

__all__ = ["DatasetVerification", "verify_datasets"]


@dataclass(frozen=True)
class DatasetVerification:
    dataset: str
    problems: tuple[str, ...]
    #: Transforms re-executed and matched (None: not reproduced).
    reproduced: int | None = None
    #: Blocks in the chain, and how many of them this check verified (all, or the new ones).
    blocks: int = 0
    checked: int = 0
    #: Whether the whole chain was checked (``False``: only the blocks since the last check).
    full: bool = True


def verify_datasets(
    workspace: Workspace,
    names: Sequence[str],
    *,
    integrity: bool = False,
    engine: Any = None,
    full: bool = True,
) -> Iterator[DatasetVerification]:
    """Verify each dataset in turn; with ``engine``, also re-execute a sound derivative's transforms.

    Without ``full``, each dataset's chain is checked only after the head its last successful check
    recorded (``storage/verify_record.py``); re-executing transforms (``engine``) always checks all.
    """
    for name in names:
        dataset = workspace.open(name)
        checked = check_in_workspace(
            workspace, dataset, integrity=integrity or engine is not None, full=full or engine is not None
        )
        problems = [str(p) for p in checked.problems]
        reproduced = None
        if engine is not None and not problems and dataset.kind is model.DatasetKind.Derivative:
            from odfproj.transform.reproduce import reproduce_all  # starts Spark work: only when asked

            results = reproduce_all(workspace, dataset.name, engine)
            problems += [r.message for r in results if not r.ok]
            reproduced = None if problems else len(results)
        yield DatasetVerification(
            dataset.name, tuple(problems), reproduced, checked.blocks, checked.checked, checked.full
        )
