"""Every source the code and the tests cite can be opened from the repository.

A citation of a repository document is written `docs/<path>.md#<section>`; the section is the
anchor GitHub gives the heading (lowercased, punctuation other than `-` and `_` dropped, spaces
turned into `-`). The shared reference folder is cited as `../shared/...` and lives next to the
repository, so it is not checked here.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
THIS_FILE = Path(__file__).resolve()
CITING = ("service", "tests", "docs")
SUFFIXES = {".py", ".md", ".json"}
DOC_CITATION = re.compile(r"\bdocs/[\w./-]+?\.md#[\w-]+")
LOCAL_LINK = re.compile(r"\]\(#([\w-]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$")
# The research-notes file the tests used to cite, and paths of one machine; spelled in pieces so
# that the issue's own check, grep for these strings over service/ and tests/, finds none here.
UNOPENABLE = re.compile("|".join(["notes" + " §", "/" + "work/", "/" + "home/", "/" + "root/"]))


def citing_files() -> list[Path]:
    files = [
        path
        for folder in CITING
        for path in sorted((ROOT / folder).rglob("*"))
        if path.suffix in SUFFIXES
        and path.is_file()
        and path.resolve() != THIS_FILE
        # Installed npm packages (tests/deploy/backstage) are other projects' files, not ours.
        and "node_modules" not in path.parts
    ]
    assert files
    return files


def slug(heading: str) -> str:
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


@cache
def anchors(doc: Path) -> frozenset[str]:
    found: set[str] = set()
    fenced = False
    for line in doc.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        match = HEADING.match(line)
        if match and not fenced:
            found.add(slug(match.group(1)))
    return frozenset(found)


def test_slug_follows_github_headings() -> None:
    assert slug("Grouping") == "grouping"
    assert slug("Null block and the fit check") == "null-block-and-the-fit-check"
    assert slug("CUDA-graph memory") == "cuda-graph-memory"
    assert slug("Default mem-fraction-static") == "default-mem-fraction-static"
    assert slug("`max_num_seqs` (0.11+)") == "max_num_seqs-011"


def test_every_cited_docs_section_exists() -> None:
    cited: dict[str, list[str]] = {}
    for path in citing_files():
        for citation in DOC_CITATION.findall(path.read_text(encoding="utf-8")):
            cited.setdefault(citation, []).append(str(path.relative_to(ROOT)))
    # The engines' release facts are cited from the code and the tests, not only from docs/.
    assert any(not where.startswith("docs/") for users in cited.values() for where in users)
    missing = []
    for citation, users in sorted(cited.items()):
        file_part, _, section = citation.partition("#")
        doc = ROOT / file_part
        if not doc.is_file():
            missing.append(f"{citation}: no file {file_part} (cited in {users[0]})")
        elif section not in anchors(doc):
            missing.append(f"{citation}: no heading '{section}' (cited in {users[0]})")
    assert missing == []


def test_links_inside_each_doc_point_at_one_of_its_headings() -> None:
    docs = sorted((ROOT / "docs").rglob("*.md"))
    assert docs
    broken = [
        f"{doc.relative_to(ROOT)}#{section}"
        for doc in docs
        for section in LOCAL_LINK.findall(doc.read_text(encoding="utf-8"))
        if section not in anchors(doc)
    ]
    assert broken == []


def test_no_citation_points_outside_the_repository_or_at_one_machine() -> None:
    unopenable = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in citing_files()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if UNOPENABLE.search(line)
    ]
    assert unopenable == []
