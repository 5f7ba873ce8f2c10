"""Fetch of ``Container`` sources, with small real executables standing in for podman and docker.

The stand-ins are Python scripts on a private ``PATH``: they receive the real command line and
environment, emulate ``run`` by executing a scripted behaviour, and let us check what would reach
the container without needing a container runtime on the test machine.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from odfproj.ingest.errors import FetchError, MissingParameterError
from odfproj.ingest.fetch import KIND_ETAG, KIND_LAST_MODIFIED, FetchResult, fetch, find_container_runtime
from odfproj.odf import model

SYSTEM_TIME = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)

# Emulates `<runtime> run --rm -v HOST:/opt/odf/out [-e NAME]... [--entrypoint X] IMAGE ARGS...`:
# records argv and the forwarded variables, then behaves as the IMAGE name says.
FAKE_RUNTIME = """#!{python}
import json, os, sys
argv = sys.argv[1:]
out_host = None
names = []
i = 2
while argv[i].startswith("-"):
    if argv[i] == "-v":
        out_host = argv[i + 1].split(":")[0]
    elif argv[i] == "-e":
        names.append(argv[i + 1])
    i += 2
image, args = argv[i], argv[i + 1:]
forwarded = {{n: os.environ.get(n) for n in names}}
with open(os.path.join(out_host, "record.json"), "w") as f:
    json.dump({{"tool": os.path.basename(sys.argv[0]), "argv": argv, "env": forwarded}}, f)
if image == "fail":
    sys.stderr.write("pulling image...\\nError: rate limit exceeded\\n\\n")
    sys.exit(3)
if image == "etag":
    with open(os.path.join(out_host, "new-etag"), "w") as f:
        f.write("abc")
    if forwarded.get("ODF_ETAG") != "abc":
        sys.stdout.write('{{"x": 1}}\\n')
    sys.exit(0)
if image == "modified":
    with open(os.path.join(out_host, "new-last-modified"), "w") as f:
        f.write("2024-01-01T10:00:00+02:00")
    with open(os.path.join(out_host, "new-has-more-data"), "w") as f:
        f.write("")
sys.stdout.write('{{"x": 1}}\\n{{"x": 2}}\\n')
"""


def install(bin_dir: Path, *tools: str) -> None:
    bin_dir.mkdir(exist_ok=True)
    for tool in tools:
        path = bin_dir / tool
        path.write_text(FAKE_RUNTIME.format(python=sys.executable))
        path.chmod(0o755)


def run(
    step: model.FetchStepContainer,
    tmp_path: Path,
    environ: dict[str, str],
    prev: model.SourceState | None = None,
) -> FetchResult:
    return fetch(
        step,
        dataset="c.ds",
        source="default",
        prev_state=prev,
        project_root=tmp_path,
        work_dir=tmp_path / "work",
        system_time=SYSTEM_TIME,
        environ=environ,
    )


def record(tmp_path: Path) -> dict:
    (path,) = (tmp_path / "work").glob("container-*/record.json")
    return json.loads(path.read_text())


def test_missing_runtime_names_both_tools(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    env = {"PATH": str(tmp_path / "bin")}
    assert find_container_runtime(env) is None
    with pytest.raises(FetchError, match=r"neither podman nor docker is on PATH") as e:
        run(model.FetchStepContainer(image="img"), tmp_path, env)
    assert "'c.ds'" in str(e.value) and "container img" in str(e.value)


def test_podman_is_preferred_and_stdout_is_the_data(tmp_path: Path) -> None:
    install(tmp_path / "bin", "podman", "docker")
    env = {"PATH": str(tmp_path / "bin")}
    result = run(model.FetchStepContainer(image="plain", args=("--since", "x")), tmp_path, env)
    (item,) = result.items
    assert item.path.read_text() == '{"x": 1}\n{"x": 2}\n'
    assert item.temporary and item.display_name == "container plain"
    assert item.source_state is None and not result.has_more
    rec = record(tmp_path)
    assert rec["tool"] == "podman"
    assert rec["argv"][:3] == ["run", "--rm", "-v"]
    assert rec["argv"][-3:] == ["plain", "--since", "x"]
    assert rec["env"]["ODF_ETAG"] == "" and rec["env"]["ODF_BATCH_SIZE"] == "10000"


def test_docker_when_no_podman(tmp_path: Path) -> None:
    install(tmp_path / "bin", "docker")
    run(model.FetchStepContainer(image="plain"), tmp_path, {"PATH": str(tmp_path / "bin")})
    assert record(tmp_path)["tool"] == "docker"


def test_env_and_args_templates_are_passed_by_name(tmp_path: Path) -> None:
    install(tmp_path / "bin", "podman")
    env = {"PATH": str(tmp_path / "bin"), "GH_TOKEN": "tok", "PASSED": "through"}
    step = model.FetchStepContainer(
        image="plain",
        command=("/fetch", "--verbose"),
        args=("--access-token", "${{ env.GH_TOKEN }}"),
        env=(model.EnvVar(name="FIXED", value="v-${{ env.GH_TOKEN }}"), model.EnvVar(name="PASSED")),
    )
    run(step, tmp_path, env)
    rec = record(tmp_path)
    assert rec["env"]["FIXED"] == "v-tok" and rec["env"]["PASSED"] == "through"
    assert "v-tok" not in rec["argv"]  # values travel in the environment, not on the command line
    entry = rec["argv"].index("--entrypoint")
    assert rec["argv"][entry + 1] == "/fetch"
    assert rec["argv"][-4:] == ["plain", "--verbose", "--access-token", "tok"]


def test_missing_pass_through_variable(tmp_path: Path) -> None:
    install(tmp_path / "bin", "podman")
    step = model.FetchStepContainer(image="plain", env=(model.EnvVar(name="API_KEY"),))
    with pytest.raises(MissingParameterError, match=r"API_KEY is not set"):
        run(step, tmp_path, {"PATH": str(tmp_path / "bin")})


def test_failure_reports_exit_code_and_last_stderr_line(tmp_path: Path) -> None:
    install(tmp_path / "bin", "podman")
    with pytest.raises(FetchError) as e:
        run(model.FetchStepContainer(image="fail"), tmp_path, {"PATH": str(tmp_path / "bin")})
    message = str(e.value)
    assert "container fail exited with code 3: Error: rate limit exceeded" in message
    assert "'c.ds'" in message and "\n" not in message
    assert not list((tmp_path / "work").glob("container-output-*"))


def test_etag_protocol_and_up_to_date(tmp_path: Path) -> None:
    install(tmp_path / "bin", "podman")
    env = {"PATH": str(tmp_path / "bin")}
    (item,) = run(model.FetchStepContainer(image="etag"), tmp_path, env).items
    assert item.source_state == model.SourceState(source_name="default", kind=KIND_ETAG, value="abc")
    # the container sees ODF_ETAG=abc, prints nothing and reports the same etag: nothing new
    assert run(
        model.FetchStepContainer(image="etag"), tmp_path / "again", env, prev=item.source_state
    ).up_to_date


def test_last_modified_and_has_more(tmp_path: Path) -> None:
    install(tmp_path / "bin", "podman")
    result = run(model.FetchStepContainer(image="modified"), tmp_path, {"PATH": str(tmp_path / "bin")})
    assert result.has_more
    assert result.items[0].source_state == model.SourceState(
        source_name="default", kind=KIND_LAST_MODIFIED, value="2024-01-01T08:00:00Z"
    )
