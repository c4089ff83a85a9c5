"""Make the documentation's screenshots from the real programs.

- `images/tui.svg`: the terminal UI on `treetool demo`'s model, driven by Textual's Pilot and
  saved by Textual's own `App.save_screenshot`;
- `images/notebook.png`: the notebook view (`tt.view(tree)._repr_html_()`) of the same tree,
  rendered by headless Chromium.

    python docs/make_screenshots.py [OUT_DIR]      # default: docs/images

Chromium is found as `chromium` or `chromium-browser` on PATH (or `$CHROMIUM`); without it the
PNG is skipped, with a note on stderr, and the exit status is 3.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

TUI_SIZE = (110, 30)
PAGE_SIZE = (1000, 420)


async def _tui(out: Path) -> Path:
    from treetool.tui.app import TreetoolApp

    from treetool.cli import demo_tree

    app = TreetoolApp(
        demo_tree(), title="treetool demo: an equinox transformer and its adamw state"
    )
    async with app.run_test(size=TUI_SIZE) as pilot:
        await pilot.pause()
        # open the model, its blocks, and the first block; the cursor on that block
        for key in ("down", "right", "down", "down", "right", "down", "right", "down", "right"):
            await pilot.press(key)
            await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        path = app.save_screenshot(filename="tui.svg", path=str(out))
    return Path(path)


def tui_screenshot(out: Path) -> Path:
    """The terminal UI on the demo model, as SVG."""
    return asyncio.run(_tui(out))


def chromium() -> str | None:
    """The Chromium binary, or None."""
    found = (
        os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    )
    return found if found and Path(found).exists() else None


def notebook_screenshot(out: Path, browser: str) -> Path:
    """The notebook view of the demo model, as PNG, through headless Chromium."""
    import treetool as tt
    from treetool.cli import demo_tree

    page = (
        "<!doctype html><html><head><meta charset='utf-8'>"
        "<style>body{font-family:system-ui,sans-serif;margin:16px;background:#fff}</style>"
        f"</head><body>{tt.view(demo_tree())._repr_html_()}</body></html>"
    )
    target = out / "notebook.png"
    with tempfile.TemporaryDirectory(prefix="treetool-shot-") as tmp:
        html = Path(tmp) / "view.html"
        html.write_text(page, encoding="utf-8")
        cmd = [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={Path(tmp) / 'profile'}",
            "--hide-scrollbars",
            f"--window-size={PAGE_SIZE[0]},{PAGE_SIZE[1]}",
            f"--screenshot={target}",
            html.as_uri(),
        ]
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    return target


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else Path(__file__).with_name("images")
    out.mkdir(parents=True, exist_ok=True)
    print(tui_screenshot(out))
    browser = chromium()
    if browser is None:
        print("make_screenshots: no chromium found: notebook.png not made", file=sys.stderr)
        return 3
    print(notebook_screenshot(out, browser))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
