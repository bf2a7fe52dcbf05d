"""The repository holds code, not a lab notebook: what a newcomer clones stays small and current.

These pin the repository's shape rather than the package's behaviour: the tracked tree stays small
(benchmark runs are results, not history, and SQLite stores are never tracked), every kept run
folder is cited by the README or the docs (an uncited run is clutter, a citation of a missing run a
dead link), the README starts with the quick start, the design pages describe the code in the
present tense (run ids, dates and session numbers belong to ``docs/results.md`` and git history),
and every path the docs and the code's comments name exists.

The tests that read ``git ls-files`` skip, with the reason, where the tree is not a git checkout
(an unpacked sdist, for example); the others read the files on disk.
"""

from __future__ import annotations

import ast
import fnmatch
import io
import re
import shutil
import subprocess
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
RESULTS = ROOT / "benchmarks" / "results"
# The code whose comments and docstrings must say why, not when. The benchmark's datasets are data
# (published text that may hold anything), not code.
CODE_ROOTS = (ROOT / "minicache", ROOT / "benchmarks" / "minicache_bench")
CORPUS = ROOT / "benchmarks" / "minicache_bench" / "corpus"

MAX_TRACKED_BYTES = 15_000_000
MAX_README_LINES = 150
QUICK_START_LINES = 30

RUN_ID = re.compile(r"\b(formula|svamp|tatqa|webshop|no-repetition)-v\d+\b")
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
SESSION = re.compile(r"\bsession \d+")
SCRIPT_PY = re.compile(r"\bscripts/([\w.-]+\.py)\b")
# A repository path as the docs write it: from the repository root, or from docs/ with ``../``.
# Not a path that merely ends in one of these names (``~/.cache/minicache/models``), nor one in git
# history (``405b9d7:scripts/NAME``).
DOC_PATH = re.compile(
    r"(?:(?<=\.\./)|(?<![\w./~:-]))((?:scripts|minicache|benchmarks|tests)/[\w./-]*)"
)
RESULTS_LINK = re.compile(r"benchmarks/results/([\w.-]+)")


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout


@pytest.fixture(scope="module")
def tracked_files() -> list[str]:
    """The paths ``git ls-files`` lists, or a skip saying why there is no git checkout to read."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed, so the tracked tree cannot be listed")
    try:
        top = _git("rev-parse", "--show-toplevel").strip()
    except subprocess.CalledProcessError:
        pytest.skip(f"{ROOT} is not a git checkout, so the tracked tree cannot be listed")
    if Path(top).resolve() != ROOT:
        pytest.skip(f"{ROOT} is not the root of its own git checkout (that is {top})")
    return [p for p in _git("ls-files", "-z").split("\0") if p]


def design_pages() -> list[Path]:
    """docs/*.md except results.md, which is where measured results keep their run ids and dates."""
    return sorted(p for p in DOCS.glob("*.md") if p.name != "results.md")


def readme_and_docs() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def matches_by_line(paths: list[Path], pattern: re.Pattern[str]) -> list[str]:
    """``file:line: match`` for every match of ``pattern`` in ``paths``."""
    found = []
    for path in paths:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            for match in pattern.finditer(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {match.group(0)}")
    return found


def code_files() -> list[Path]:
    return sorted(
        path
        for root in CODE_ROOTS
        for path in root.rglob("*.py")
        if not path.is_relative_to(CORPUS) and "__pycache__" not in path.parts
    )


def comments_and_docstrings(path: Path) -> list[tuple[int, str]]:
    """Every comment and docstring of a module, with the line it starts on.

    A docstring here is any string literal standing alone as a statement (a module's, a class's, a
    function's, or one under an assignment): the text a reader takes for documentation. Strings the
    code uses (a date format's example, a prompt) are data and may hold anything."""
    source = path.read_text(encoding="utf-8")
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    found = [(tok.start[0], tok.string) for tok in tokens if tok.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            found.append((node.lineno, node.value.value))
    return found


def code_text_matches(pattern: re.Pattern[str]) -> list[str]:
    """``file:line: match`` for every match of ``pattern`` in the code's comments and docstrings."""
    found = []
    for path in code_files():
        for start, text in comments_and_docstrings(path):
            for match in pattern.finditer(text):
                line = start + text.count("\n", 0, match.start())
                found.append(f"{path.relative_to(ROOT)}:{line}: {match.group(0)}")
    return sorted(set(found), key=lambda hit: (hit.split(":")[0], int(hit.split(":")[1])))


# --- the tracked tree ---


def test_tracked_tree_is_under_15_mb(tracked_files: list[str]) -> None:
    sizes = {p: (ROOT / p).stat().st_size for p in tracked_files if (ROOT / p).is_file()}
    total = sum(sizes.values())
    largest = sorted(sizes.items(), key=lambda item: -item[1])[:10]
    assert total < MAX_TRACKED_BYTES, f"tracked files hold {total / 1e6:.1f} MB; largest: {largest}"


def test_no_sqlite_store_is_tracked(tracked_files: list[str]) -> None:
    stores = [p for p in tracked_files if fnmatch.fnmatch(Path(p).name, "*.db*")]
    assert stores == [], f"tracked database files (git rm --cached them): {stores}"


# --- kept benchmark runs ---


def test_every_run_folder_is_cited_by_the_readme_or_the_docs() -> None:
    folders = sorted(p.name for p in RESULTS.iterdir() if p.is_dir())
    text = "\n".join(p.read_text(encoding="utf-8") for p in readme_and_docs())
    cited = set(RESULTS_LINK.findall(text))
    uncited = [name for name in folders if name not in cited]
    assert uncited == [], f"run folders no page cites as benchmarks/results/<name>: {uncited}"


def test_every_cited_run_folder_exists() -> None:
    dead = [
        hit
        for hit in matches_by_line(readme_and_docs(), RESULTS_LINK)
        if not (RESULTS / hit.rsplit("benchmarks/results/", 1)[1].rstrip(".")).exists()
    ]
    assert dead == [], f"links to runs that are not under benchmarks/results/: {dead}"


# --- the README ---


def test_readme_is_at_most_150_lines() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines"


def test_readme_shows_make_run_and_make_test_in_its_first_30_lines() -> None:
    head = "\n".join(README.read_text(encoding="utf-8").splitlines()[:QUICK_START_LINES])
    assert "make run" in head
    assert "make test" in head


# --- design pages in the present tense ---


def test_design_pages_name_no_run_id() -> None:
    found = matches_by_line(design_pages(), RUN_ID)
    assert found == [], "\n".join(found)


def test_design_pages_name_no_date() -> None:
    found = matches_by_line(design_pages(), DATE)
    assert found == [], "\n".join(found)


def test_design_pages_name_no_session_number() -> None:
    found = matches_by_line(design_pages(), SESSION)
    assert found == [], "\n".join(found)


# --- comments say why, not when ---


def test_code_comments_and_docstrings_name_no_run_id() -> None:
    found = code_text_matches(RUN_ID)
    assert found == [], "\n".join(found)


def test_code_comments_and_docstrings_name_no_date() -> None:
    found = code_text_matches(DATE)
    assert found == [], "\n".join(found)


def test_code_comments_and_docstrings_name_no_missing_script() -> None:
    missing = [
        hit
        for hit in code_text_matches(SCRIPT_PY)
        if not (ROOT / "scripts" / hit.rsplit("scripts/", 1)[1]).is_file()
    ]
    assert missing == [], "scripts that do not exist:\n" + "\n".join(missing)


# --- paths the docs name ---


def test_every_path_the_readme_and_docs_name_exists() -> None:
    missing = []
    for path in readme_and_docs():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            for match in DOC_PATH.finditer(line):
                named = match.group(1).rstrip("./")
                if not (ROOT / named).exists():
                    missing.append(f"{path.relative_to(ROOT)}:{number}: {named}")
    assert missing == [], "paths that do not exist:\n" + "\n".join(missing)
