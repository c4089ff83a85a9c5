"""Every code block of README.md and docs/*.md runs and prints what the page shows.

The runner is `tests/docs_blocks.py` (its docstring says what each kind of block means); a
page runs in a fresh process (its own jax, its own registrations), in an empty directory; the
pages' processes run side by side, as many at once as there are cores. The
runner's own rules are tested here on small pages, in-process.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import docs_blocks
import pytest
from cli_runner import together

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_pages_found() -> None:
    names = {p.name for p in PAGES}
    assert {"README.md", "index.md", "inspect.md", "loading.md", "safety.md", "api.md"} <= names


def _run_page(page: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "tests" / "docs_blocks.py"), "--json", str(page)],
        capture_output=True,
        text=True,
        timeout=280,
    )


@pytest.fixture(scope="module")
def page_runs(request: pytest.FixtureRequest) -> dict[str, subprocess.CompletedProcess[str]]:
    """Each selected page's run, by page name: the pages run in their own processes as before,
    but together (as many at once as there are cores) when the first page test asks."""
    wanted = sorted(
        {
            item.callspec.params["page"]
            for item in request.session.items
            if item.path == request.path
            and getattr(item, "originalname", "") == "test_page_blocks_print_what_the_page_shows"
        }
    )
    runs = together(*(functools.partial(_run_page, page) for page in wanted))
    return {page.name: run for page, run in zip(wanted, runs)}


# the first page test waits for every page: a longer limit than one page's
@pytest.mark.timeout(900)
@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_page_blocks_print_what_the_page_shows(
    page: Path, page_runs: dict[str, subprocess.CompletedProcess[str]]
) -> None:
    proc = page_runs[page.name]
    assert proc.stdout.strip(), proc.stderr
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    bad = [r for r in results if not r["ok"]]
    report = "\n".join(
        f"{page.name}:{r['line']} ({r['kind']})\n--- page shows:\n{r['expected']}\n--- actual:\n{r['actual']}"
        for r in bad
    )
    assert not bad, report
    assert proc.returncode == 0, proc.stderr


def _run(tmp_path: Path, text: str) -> list[docs_blocks.Result]:
    page = tmp_path / "page.md"
    page.write_text(text)
    return docs_blocks.run_page(page)


PAGE = """
```python
x = 6 * 7
print(x)
```
```text
42
```

```python
>>> x + 1
43
>>> {}["k"]
Traceback (most recent call last):
KeyError: 'k'
```
"""


def test_runner_passes_a_true_page(tmp_path: Path) -> None:
    results = _run(tmp_path, PAGE)
    assert [(r.kind, r.ok) for r in results] == [
        ("python", True),
        ("doctest", True),
        ("doctest", True),
    ]


def test_runner_catches_wrong_output(tmp_path: Path) -> None:
    results = _run(tmp_path, PAGE.replace("42", "41").replace("43", "44"))
    assert [(r.kind, r.ok) for r in results] == [
        ("python", False),
        ("doctest", False),
        ("doctest", True),
    ]
    assert results[0].actual == "42\n"
    assert results[1].actual == "43\n"


def test_runner_catches_a_failing_block_that_shows_no_output(tmp_path: Path) -> None:
    results = _run(tmp_path, "```python\nraise ValueError('boom')\n```\n")
    assert len(results) == 1
    assert not results[0].ok
    assert "ValueError: boom" in results[0].actual
    assert "page.md" in results[0].actual  # the traceback names the page


def test_runner_directives(tmp_path: Path) -> None:
    text = (
        "<!-- docs-test: setup\nmade = 'by setup'\n-->\n\n"
        "<!-- docs-test: skip needs a GPU -->\n```python\nraise SystemExit\n```\n\n"
        "<!-- docs-test: no-compare prints a memory address -->\n"
        "```python\nprint(made, object())\n```\n```text\nwhatever\n```\n"
    )
    results = _run(tmp_path, text)
    assert [(r.kind, r.ok) for r in results] == [("setup", True), ("python", True)]
    assert results[1].actual.startswith("by setup <object object at 0x")


def test_runner_directive_must_say_why(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="line 2: a skip directive must say why"):
        _run(tmp_path, "\n<!-- docs-test: skip -->\n```python\npass\n```\n")


def test_runner_restores_the_process(tmp_path: Path) -> None:
    import os

    cwd, path = os.getcwd(), list(sys.path)
    _run(tmp_path, "```python\nimport os\nos.environ['DOCS_BLOCKS_PROBE'] = '1'\n```\n")
    assert os.getcwd() == cwd
    assert sys.path == path
    assert "DOCS_BLOCKS_PROBE" not in os.environ


def test_update_writes_the_actual_output(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(PAGE.replace("42", "41").replace("43", "44"))
    docs_blocks.update(page, docs_blocks.run_page(page))
    assert page.read_text() == PAGE


def test_readme_holds_the_set_up_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    assert '```\npip install -e ".[demo]" && treetool demo\n```' in readme
    assert (
        '```\npip install -c requirements/dev.lock -e ".[dev]" && python -m pytest\n```' in readme
    )
    assert '`python -m pytest -m "not slow"` is the fast run' in readme
    assert 140 <= readme.count("\n") <= 210
