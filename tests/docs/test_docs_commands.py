"""Every ``odfproj ...`` command line in docs/guide names a real command and only options it has.

Command lines are taken from shell code blocks (```` ```bash ````, ```` ```sh ````, ```` ```console ````
or no language), from inline code spans and from headings (the reference's synopses), split at ``&&``, ``||``, ``|``, ``;`` and redirections;
each piece that starts with ``odfproj`` is checked against the command tree the CLI really builds
(typer's click objects, so ``--help`` and the option names are the same ones users get). Words in
capitals after the command (``FILE``, ``BLOCK_HASH``) are placeholders and not checked; synopsis
brackets (``[--name NAME]``) are looked through.

Failures name the file and line, the command line and the option, so that a page added on another
branch that drifts from the CLI is easy to mend.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer

from odfproj.cli.main import app

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide"

#: Fenced blocks in these languages hold shell commands (an empty language too).
SHELL_LANGUAGES = {"", "bash", "sh", "shell", "console", "zsh"}

_FENCE = re.compile(r"^\s*(```+|~~~+)\s*([\w+-]*)")
_HEADING = re.compile(r"^#+\s+(odfproj\b[^`]*)$")
_INLINE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
_SEPARATORS = re.compile(r"\s*(?:&&|\|\||[|;]|\d?>>?|<)\s*")


@dataclass(frozen=True)
class DocCommand:
    """One ``odfproj`` command line in a page: where it is, and its words after ``odfproj``."""

    path: Path
    line: int
    text: str

    def where(self) -> str:
        return f"{self.path.relative_to(GUIDE.parents[1])}:{self.line}"


def extract_commands(path: Path, text: str) -> Iterator[DocCommand]:
    """The ``odfproj`` command lines of one Markdown page."""
    fence: str | None = None
    shell = False
    pending = ""
    pending_line = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        opening = _FENCE.match(raw)
        if opening and (fence is None or opening.group(1).startswith(fence)):
            if fence is None:
                fence, shell = opening.group(1), opening.group(2).lower() in SHELL_LANGUAGES
            else:
                fence = None
            continue
        if fence is not None:
            if not shell:
                continue
            line = raw.strip()
            if line.startswith("$ "):
                line = line[2:]
            if pending:
                line, number = pending + " " + line, pending_line
            if line.endswith("\\"):
                pending, pending_line = line[:-1].rstrip(), number
                continue
            pending = ""
            yield from _commands_in(path, number, _strip_comment(line))
        else:
            heading = _HEADING.match(raw)
            if heading:  # the reference's synopses: ## odfproj plan [SELECTION] [--format ...]
                yield from _commands_in(path, number, heading.group(1))
            for match in _INLINE.finditer(raw):
                yield from _commands_in(path, number, match.group(1))


def _strip_comment(line: str) -> str:
    """Drop a trailing ``# comment`` that is not inside quotes."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line


def _commands_in(path: Path, number: int, line: str) -> Iterator[DocCommand]:
    for piece in _split_outside_quotes(line):
        if piece == "odfproj" or piece.startswith("odfproj "):
            yield DocCommand(path, number, piece)


def _split_outside_quotes(line: str) -> list[str]:
    pieces, start, quote = [], 0, None
    i = 0
    while i < len(line):
        char = line[i]
        if quote:
            if char == "\\":
                i += 1
            elif char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        else:
            separator = _SEPARATORS.match(line, i)
            if separator and separator.end() > i and separator.group().strip():
                pieces.append(line[start:i].strip())
                start = i = separator.end()
                continue
        i += 1
    pieces.append(line[start:].strip())
    return [p for p in pieces if p]


def check(command: DocCommand, root: typer.core.TyperGroup) -> list[str]:
    """What is wrong with one documented command line (nothing: an empty list)."""
    try:
        words = shlex.split(command.text)[1:]
    except ValueError as e:
        return [f"{command.where()}: `{command.text}`: cannot be split like a shell would ({e})"]
    ctx = typer.Context(root, info_name="odfproj")
    current, names = root, ["odfproj"]
    problems: list[str] = []
    for raw in words:
        word = raw.strip("[]")  # a synopsis: odfproj init [DIR] [--name NAME]
        if word == "--":
            break
        if word.startswith("-") and word != "-":
            option = word.split("=", 1)[0]
            known = _options(current, ctx)
            if option not in known:
                problems.append(
                    f"{command.where()}: `{command.text}`: {' '.join(names)} has no option {option} "
                    f"(it has: {', '.join(sorted(known))})"
                )
            continue
        commands = getattr(current, "commands", None)
        if commands is None:
            continue  # an argument or an option's value
        if word.isupper() or not word.replace("-", "").isalpha():
            continue  # a placeholder such as COMMAND
        sub = current.get_command(ctx, word)
        if sub is None:
            problems.append(
                f"{command.where()}: `{command.text}`: {' '.join(names)} has no command {word!r} "
                f"(it has: {', '.join(sorted(commands))})"
            )
            break
        current, names = sub, [*names, word]
        ctx = typer.Context(current, info_name=word, parent=ctx)
    return problems


def _options(command: typer.core.TyperCommand | typer.core.TyperGroup, ctx: typer.Context) -> set[str]:
    names = set(app.info.context_settings["help_option_names"])  # every command has them
    for param in command.get_params(ctx):
        if param.param_type_name == "option":
            names.update(param.opts)
            names.update(param.secondary_opts)
    return names


def _guide_commands() -> list[DocCommand]:
    return [
        command
        for page in sorted(GUIDE.glob("*.md"))
        for command in extract_commands(page, page.read_text(encoding="utf-8"))
    ]


def _root() -> typer.core.TyperGroup:
    root = typer.main.get_command(app)
    assert isinstance(root, typer.core.TyperGroup)
    return root


def test_the_guide_shows_commands() -> None:
    found = _guide_commands()
    assert len(found) > 30, found  # the extraction itself works on the real pages
    shown = {c.text.split()[1] for c in found if len(c.text.split()) > 1}
    assert {"init", "validate", "plan", "run", "query", "sql", "watch", "lineage", "fmt"} <= shown


def test_every_command_line_in_the_guide_exists() -> None:
    root = _root()
    problems = [problem for command in _guide_commands() for problem in check(command, root)]
    assert not problems, "docs/guide names commands or options the CLI lacks:\n" + "\n".join(problems)


PAGE = """\
## odfproj watch [SELECTION] [--apply] [--dry]

Run `odfproj plan --colour always` to see it in colour.

```bash
odfproj validate && odfproj run --threads 2 \\
    --fast   # a comment --ignored
odfproj lineage --format dot | dot -Tsvg > g.svg
odfproj frobnicate
odfproj block hash --version 2 FILE
odfproj init [DIR] [--name NAME] [--force]
```

```text
odfproj will perform the following actions: --not-an-option
```
"""


def test_a_doc_naming_a_missing_option_fails_with_file_line_and_option(tmp_path: Path) -> None:
    page = GUIDE / "example.md"  # only its name is used, to print a path relative to the repository
    found = list(extract_commands(page, PAGE))
    assert [(c.line, c.text) for c in found] == [
        (1, "odfproj watch [SELECTION] [--apply] [--dry]"),
        (3, "odfproj plan --colour always"),
        (6, "odfproj validate"),
        (6, "odfproj run --threads 2 --fast"),
        (8, "odfproj lineage --format dot"),
        (9, "odfproj frobnicate"),
        (10, "odfproj block hash --version 2 FILE"),
        (11, "odfproj init [DIR] [--name NAME] [--force]"),
    ]
    root = _root()
    problems = [problem for command in found for problem in check(command, root)]
    assert len(problems) == 5, problems
    assert problems.pop(0).startswith(
        "docs/guide/example.md:1: `odfproj watch [SELECTION] [--apply] [--dry]`"
    )
    assert problems[0].startswith(
        "docs/guide/example.md:3: `odfproj plan --colour always`: odfproj plan has no option --colour"
    )
    assert problems[1].startswith(
        "docs/guide/example.md:6: `odfproj run --threads 2 --fast`: odfproj run has no option --fast"
    )
    assert "--threads" in problems[1]  # the options it does have are listed
    assert problems[2].startswith(
        "docs/guide/example.md:9: `odfproj frobnicate`: odfproj has no command 'frobnicate'"
    )


@pytest.mark.parametrize(
    ("line", "pieces"),
    [
        ("cd weather && git init && odfproj validate", ["cd weather", "git init", "odfproj validate"]),
        ('odfproj sql "SELECT a | b; c" --format csv', ['odfproj sql "SELECT a | b; c" --format csv']),
        ("odfproj plan --format markdown > plan.md", ["odfproj plan --format markdown", "plan.md"]),
    ],
)
def test_command_lines_are_split_like_a_shell(line: str, pieces: list[str]) -> None:
    assert _split_outside_quotes(line) == pieces
