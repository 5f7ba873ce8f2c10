"""A hostile pull request on disk, and the CLI run on it as CI runs it: a subprocess, audited.

``run_cli`` starts ``odfproj`` in a fresh interpreter with an audit hook (``sys.addaudithook``) that
records every path the process opens, so a test proves a file was not READ, not merely not printed.
The environment carries a CI-like secret whose value must appear nowhere: stdout, stderr, files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

#: The value of every secret the tests put in the CLI's environment.
SECRET_VALUE = "s3cr3t-Value-4b2f9e"

#: Records each path opened by the process; written with os.write so the hook opens nothing itself.
_AUDITED_MAIN = textwrap.dedent(
    """
    import os, sys
    _fd = os.open(os.environ["ODFPROJ_TEST_AUDIT_LOG"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    def _hook(event, args):
        if event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
            path = os.fsdecode(args[0])
            os.write(_fd, (os.path.abspath(path) + "\\n").encode("utf-8", "surrogateescape"))
    sys.addaudithook(_hook)
    sys.argv = ["odfproj", *sys.argv[1:]]
    from odfproj.cli.main import main
    main()
    """
)

ROOT_MANIFEST = """\
kind: DatasetSnapshot
version: 1
content:
  name: {name}
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch:
        kind: FilesGlob
        path: data/*.csv
      read:
        kind: Csv
        header: true
        schema:
          - id BIGINT
          - value STRING
      merge:
        kind: Append
"""

DERIVATIVE_MANIFEST = """\
kind: DatasetSnapshot
version: 1
content:
  name: {name}
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs:
        - datasetRef: {input}
      transform:
        kind: Sql
        engine: spark
        query: SELECT id, value FROM `{input}`
"""

INFO_MANIFEST = """\
kind: DatasetSnapshot
version: 1
content:
  name: {name}
  kind: Root
  metadata:
    - kind: AddPushSource
      sourceName: default
      read:
        kind: Csv
        schema:
          - id BIGINT
      merge:
        kind: Append
    - kind: SetInfo
      description: "{description}"
"""


@dataclass(frozen=True)
class CliRun:
    returncode: int
    stdout: str
    stderr: str
    opened: tuple[str, ...]
    """Absolute paths the process opened, in order."""

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def opened_under(self, folder: Path) -> list[str]:
        prefix = str(folder.resolve())
        return [p for p in self.opened if os.path.realpath(p).startswith(prefix) or p.startswith(prefix)]


def make_project(root: Path, manifests: dict[str, str], config: str = "name: pr\n") -> Path:
    """A project folder with ``odfproj.yaml`` (``config``) and ``datasets/<file>`` for each manifest."""
    (root / "datasets").mkdir(parents=True, exist_ok=True)
    (root / "odfproj.yaml").write_text(config, encoding="utf-8")
    for name, text in manifests.items():
        path = root / "datasets" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def info_manifest(name: str, description: str) -> str:
    return INFO_MANIFEST.format(name=name, description=description)


def cli_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The CLI's environment: a scratch workspace, no other ODFPROJ_ settings, and CI-like secrets."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ODFPROJ_")}
    env["ODFPROJ_WORKSPACE"] = str(tmp_path / "workspace")
    env["GITHUB_TOKEN"] = SECRET_VALUE
    env["ODFPROJ_SECRET_WAREHOUSE"] = SECRET_VALUE
    env["DBT_ENV_SECRET_PASSWORD"] = SECRET_VALUE
    env["PLAIN_LOOKING"] = SECRET_VALUE
    env.update(extra)
    return env


def run_cli(cwd: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 180) -> CliRun:
    """``odfproj ARGS`` in ``cwd`` as a subprocess, with an audit of every opened path."""
    env = dict(env if env is not None else cli_env(cwd.parent))
    log = cwd.parent / f"audit-{os.getpid()}-{len(list(cwd.parent.glob('audit-*')))}.log"
    env["ODFPROJ_TEST_AUDIT_LOG"] = str(log)
    proc = subprocess.run(
        [sys.executable, "-c", _AUDITED_MAIN, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    opened = tuple(log.read_text(encoding="utf-8").splitlines()) if log.exists() else ()
    return CliRun(proc.returncode, proc.stdout, proc.stderr, opened)


def assert_clean_failure(run: CliRun, *, file: str | None = None) -> None:
    """Exit 1 (a user error, not 70 "internal error"), no traceback, and the file named."""
    assert run.returncode == 1, (run.returncode, run.output)
    assert "Traceback" not in run.output, run.output
    assert "internal error" not in run.output, run.output
    if file is not None:
        assert file in run.stderr, run.stderr


def assert_no_secret(run: CliRun, *files: Path) -> None:
    """The secret value is in no output and no file the command wrote."""
    assert SECRET_VALUE not in run.stdout, run.stdout
    assert SECRET_VALUE not in run.stderr, run.stderr
    for file in files:
        if file.exists():
            assert SECRET_VALUE not in file.read_text(encoding="utf-8", errors="replace"), file


def plan_json(run: CliRun) -> dict:
    return json.loads(run.stdout)
