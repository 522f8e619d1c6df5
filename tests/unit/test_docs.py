"""The documentation stays inside the repository and names files that exist.

README.md and docs/*.md may link only to files of this repository (a reader of a checkout has nothing
else), and every module path docs/architecture.md names must exist, so the document cannot drift
silently from the code it describes.
"""

from __future__ import annotations

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


def test_the_docs_exist() -> None:
    assert (REPO / "docs" / "architecture.md").is_file()
    assert "docs/architecture.md" in [m for m in LINK.findall(prose(REPO / "README.md"))]


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
