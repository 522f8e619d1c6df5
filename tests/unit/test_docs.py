"""The documentation stays inside the repository and names files that exist.

README.md and docs/*.md may link only to files of this repository (a reader of a checkout has nothing
else), and every repository path they name must exist, so no document can drift silently from the
code it describes. The README is a user's guide that reaches a working task on its first screen; the
architecture, the decisions and the benchmark history live in docs/, linked from it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import REPO

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
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
QUICKSTART = REPO / "conf" / "examples" / "quickstart.json"


@pytest.mark.parametrize("name", ["architecture.md", "decisions.md", "benchmarks.md"])
def test_the_docs_exist_and_the_readme_links_them(name: str) -> None:
    assert (REPO / "docs" / name).is_file()
    assert f"docs/{name}" in LINK.findall(prose(REPO / "README.md"))


def test_the_readme_reaches_a_working_task_on_its_first_screen() -> None:
    """The first screen holds the shipped quick-start task, verbatim, and the command that runs it
    (tests/e2e/test_demo.py runs that command)."""
    first = "\n".join((REPO / "README.md").read_text(encoding="utf-8").splitlines()[:FIRST_SCREEN])
    assert "make demo" in first
    block = re.search(r"^```json\n(.*?)^```", first, re.MULTILINE | re.DOTALL)
    assert block is not None, "no task JSON on the README's first screen"
    assert json.loads(block.group(1)) == json.loads(QUICKSTART.read_text(encoding="utf-8"))
    assert f"wormhole run {QUICKSTART.relative_to(REPO)}" in first


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
