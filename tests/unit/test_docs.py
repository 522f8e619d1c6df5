"""The documentation stays inside the repository and names files that exist.

README.md, docs/*.md and the user manual docs/manual/*.md may link only to files of this repository (a
reader of a checkout has nothing else), and every repository path they name must exist, so no document can
drift silently from the code it describes. The README is a user's guide that shows on its first screen the
task `make demo` runs; the reference is the manual, and the architecture, the decisions and the benchmark
history live in docs/, all linked from it. The task files the guide and the manual show are the shipped
examples, verbatim.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import REPO

MANUAL = REPO / "docs" / "manual"
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted(MANUAL.glob("*.md"))]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
CODE_PATH = re.compile(r"`((?:\.\./|/)?(?:[\w.-]+/)+[\w.-]*)`")
REPO_PATH = re.compile(r"`((?:wormhole|tests|scripts|conf|docs|benchmarks)/[\w./-]*)`")


def prose(path: Path) -> str:
    """The markdown without its fenced code blocks (shell examples are not links)."""
    return FENCE.sub("", path.read_text(encoding="utf-8"))


def anchors(path: Path) -> set[str]:
    """GitHub's heading slugs: lower case, punctuation dropped, spaces as hyphens."""
    slugs = set()
    for heading in re.findall(r"^#+\s+(.+?)\s*$", prose(path), re.MULTILINE):
        slugs.add(re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-"))
    return slugs


FIRST_SCREEN = 40  # lines a terminal or a repository page shows before one scrolls
README_MOST_LINES = 700  # a guide, not the reference (that is the manual's)
QUICKSTART = REPO / "conf" / "examples" / "quickstart.json"
FIRST_MYSQL_TASK = REPO / "conf" / "examples" / "mysql-first-task.json"


def json_blocks(text: str) -> list[object]:
    """The whole JSON documents of the markdown's json blocks (a fragment such as a lone ``"settings"`` key
    is left out)."""
    documents = []
    for block in re.findall(r"^```json\n(.*?)^```", text, re.MULTILINE | re.DOTALL):
        try:
            documents.append(json.loads(block))
        except json.JSONDecodeError:
            continue
    return documents


def demo_task() -> Path:
    """The task file `make demo` runs: the Makefile's demo recipe names a script, which names the file."""
    recipe = re.search(r"^demo:.*\n\t(.+)$", (REPO / "Makefile").read_text(encoding="utf-8"), re.MULTILINE)
    assert recipe is not None, "no demo target in the Makefile"
    script = re.search(r"scripts/\S+\.py", recipe.group(1))
    assert script is not None, recipe.group(1)
    named = set(re.findall(r"conf/examples/[\w.-]+\.json", (REPO / script.group(0)).read_text(encoding="utf-8")))
    assert len(named) == 1, named
    return REPO / named.pop()


@pytest.mark.parametrize("name", ["architecture.md", "decisions.md", "benchmarks.md", "manual/README.md"])
def test_the_docs_exist_and_the_readme_links_them(name: str) -> None:
    assert (REPO / "docs" / name).is_file()
    assert f"docs/{name}" in LINK.findall(prose(REPO / "README.md"))


def test_the_readme_shows_the_task_make_demo_runs_on_its_first_screen() -> None:
    """The first screen holds `make demo`, `make test` and the very task file `make demo` runs, verbatim."""
    first = "\n".join((REPO / "README.md").read_text(encoding="utf-8").splitlines()[:FIRST_SCREEN])
    assert "make demo" in first and "make test" in first
    task = demo_task()
    assert json_blocks(first)[:1] == [json.loads(task.read_text(encoding="utf-8"))], "not the demo's task"
    assert str(task.relative_to(REPO)) in first


def test_the_readme_first_mysql_task_is_the_shipped_example() -> None:
    """"Your first MySQL task" shows conf/examples/mysql-first-task.json (tests/e2e/test_examples.py runs it)
    and the command that runs it."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "## Your first MySQL task" in readme
    assert json.loads(FIRST_MYSQL_TASK.read_text(encoding="utf-8")) in json_blocks(readme)
    assert f"wormhole run {FIRST_MYSQL_TASK.relative_to(REPO)}" in readme


def test_the_manual_shows_the_quick_start_task_as_shipped() -> None:
    """The manual's smallest task is conf/examples/quickstart.json, with the command tests/e2e/test_demo.py runs."""
    tasks = (MANUAL / "tasks.md").read_text(encoding="utf-8")
    assert json.loads(QUICKSTART.read_text(encoding="utf-8")) in json_blocks(tasks)
    assert f"wormhole run {QUICKSTART.relative_to(REPO)}" in tasks


def test_the_readme_is_a_guide_of_at_most_700_lines() -> None:
    lines = len((REPO / "README.md").read_text(encoding="utf-8").splitlines())
    assert lines <= README_MOST_LINES, f"README.md has {lines} lines: move reference material to docs/manual/"


def test_the_manual_index_links_every_page() -> None:
    linked = {target.partition("#")[0] for target in LINK.findall(prose(MANUAL / "README.md"))}
    pages = {p.name for p in MANUAL.glob("*.md")} - {"README.md"}
    assert pages <= linked, sorted(pages - linked)


def test_the_readme_is_a_guide_not_a_history() -> None:
    """The benchmark figures and the decisions log moved to docs/; the README links them."""
    headings = re.findall(r"^#+\s+(.+?)\s*$", prose(REPO / "README.md"), re.MULTILINE)
    assert not [h for h in headings if h.startswith(("Performance", "Decisions", "Benchmarks"))], headings


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_link_points_to_a_file_in_the_repository(doc: Path) -> None:
    problems = []
    for target in LINK.findall(prose(doc)):
        if re.match(r"[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):
            problems.append(f"{target}: links outside the repository")
            continue
        file_part, _, anchor = target.partition("#")
        resolved = (doc.parent / file_part).resolve() if file_part else doc
        if not resolved.is_relative_to(REPO.resolve()):
            problems.append(f"{target}: points outside the repository")
        elif not resolved.exists():
            problems.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            problems.append(f"{target}: no heading #{anchor} in {resolved.relative_to(REPO)}")
    assert not problems, problems


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_no_path_named_lies_outside_the_repository(doc: Path) -> None:
    """A path in backticks that leaves the checkout (``../shared/DESIGN.md``) is a link in all but name."""
    outside = [p for p in CODE_PATH.findall(prose(doc)) if p.startswith("../")]
    assert not outside, outside


def test_every_module_path_in_the_architecture_exists() -> None:
    named = set(REPO_PATH.findall((REPO / "docs" / "architecture.md").read_text(encoding="utf-8")))
    assert len(named) >= 20, sorted(named)  # the document names the code it describes
    missing = sorted(p for p in named if not (REPO / p).exists())
    assert not missing, missing


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_repository_path_a_doc_names_exists(doc: Path) -> None:
    missing = sorted(p for p in set(REPO_PATH.findall(doc.read_text(encoding="utf-8"))) if not (REPO / p).exists())
    assert not missing, missing
