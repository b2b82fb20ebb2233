"""The pages a grader reads, looked at in headless Chromium (issue 31): the index, the C1 report and the
bundle, made from the suite's real tiny runs of C1 and C3 (rendered once per test run, tests/conftest.py), at
a laptop's width (1280 px) and a phone's (390 px). Screenshots are kept in the test's temporary folder
(<page>-<width>.png, the first screen and the whole page). Checked: the answer box is below the title, in the
page's own sans-serif type, and its headline is within the first screen; nothing is wider than a phone's
screen (a wide table scrolls inside its own box); the index's first headline is on its first screen at 1280 px
and whole at 390 px (each row a card). Marked `browser` and `slow`; skipped without Chromium or Playwright, as
tests/browser/test_browser.py.
"""

from __future__ import annotations

import pytest
from test_browser import _PLAYWRIGHT, CHROMIUM, CHROMIUM_ARGS  # Debian's Chromium, driven by Playwright

from hpml_lab.report import bundle, runner

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt-get install chromium)"),
    pytest.mark.skipif(bool(_PLAYWRIGHT), reason=_PLAYWRIGHT or "-"),
]

WIDTHS = {1280: 900, 390: 844}  # width: height of the first screen (a laptop; an iPhone 12-15's viewport)


@pytest.fixture(scope="module")
def pages(tmp_path_factory, rendered):
    """reports/ with c1 and c3 as the suite ran them for real (conftest's `rendered`, tiny profile, copied: it
    is shared), the index and the bundle (no PDF) written over them."""
    import shutil

    out = tmp_path_factory.mktemp("pages")
    for tid in ("c1", "c3"):
        run = rendered(tid)
        assert run.outcome["status"] == "ok", run.outcome["error"]
        shutil.copytree(run.reports, out / "reports", dirs_exist_ok=True)
    mp = pytest.MonkeyPatch()
    mp.setenv("HPML_OUTPUT_DIR", str(out))
    mp.setattr(bundle, "chromium", lambda: None)
    try:
        bundle.write_bundle(runner.reports_dir(), log=lambda *_: None)
        runner.write_index(runner.load_outcomes())
        assert sorted(o.task for o in runner.load_outcomes()) == ["c1", "c3"]
        yield runner.reports_dir()
    finally:
        mp.undo()


def _look(page, path, shots, name, width):
    """Open one page at one width; keep its screenshots; return what the checks read from its layout."""
    page.set_viewport_size({"width": width, "height": WIDTHS[width]})
    page.goto(path.as_uri())
    page.wait_for_load_state("load")
    page.screenshot(path=str(shots / f"{name}-{width}.png"))
    page.screenshot(path=str(shots / f"{name}-{width}-full.png"), full_page=True)
    return page.evaluate(
        """() => {
        const box = (sel) => { const e = document.querySelector(sel); if (!e) return null;
            const r = e.getBoundingClientRect(); return {top: r.top + scrollY, bottom: r.bottom + scrollY,
            left: r.left, right: r.right, font: getComputedStyle(e).fontFamily}; };
        return {scroll: document.documentElement.scrollWidth, inner: innerWidth, h1: box('h1'),
                answer: box('.hpml-answer'), headline: box('.hpml-headline'), cell: box('td.hpml-head'),
                prose: box('.jp-RenderedMarkdown p') || box('p')};
    }"""
    )


def test_the_pages_in_chromium_at_a_laptops_and_a_phones_width(pages, tmp_path):
    from playwright.sync_api import sync_playwright

    seen = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            for name in ("index", "c1", "bundle"):
                for width in WIDTHS:
                    seen[name, width] = _look(page, pages / f"{name}.html", tmp_path, name, width)
        finally:
            browser.close()
    for width, height in WIDTHS.items():
        c1 = seen["c1", width]
        assert c1["answer"]["top"] >= c1["h1"]["bottom"], "the answer box is below the report's title"
        assert c1["headline"]["top"] < height and c1["headline"]["bottom"] <= height + 40, (
            "headline on screen 1"
        )
        # the box is in the page's own type (the notebook's prose), not a default serif
        assert c1["headline"]["font"] == c1["prose"]["font"] and "sans-serif" in c1["headline"]["font"]
        bundle_ = seen["bundle", width]
        assert (
            bundle_["headline"]["font"] == bundle_["prose"]["font"]
            and "sans-serif" in bundle_["prose"]["font"]
        )
        for name in ("index", "c1", "bundle"):
            s = seen[name, width]
            assert s["scroll"] <= s["inner"] + 1, (
                f"{name} is wider than the screen at {width} px: {s['scroll']}"
            )
    phone = seen["index", 390][
        "cell"
    ]  # on a phone each row is a card: the headline is not cut off at the right
    assert phone["left"] >= 0 and phone["right"] <= 391, phone
    index = seen["index", 1280]
    assert index["cell"] is not None and index["cell"]["bottom"] < WIDTHS[1280], "first headline on screen 1"
    assert all(
        (tmp_path / f"{n}-{w}.png").stat().st_size > 5_000 for n in ("index", "c1", "bundle") for w in WIDTHS
    )
    print(f"screenshots: {tmp_path}")
