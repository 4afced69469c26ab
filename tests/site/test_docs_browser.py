"""The built site in a real browser: headless Chromium (Debian's ``chromium``) opens every page
of the nav from a local HTTP server on 127.0.0.1 and fails on a JavaScript error, a request the
server could not answer, an image that did not load or an empty benchmark plot. Screenshots of
the home page, the benchmarks page and the API reference go to build/docs-screenshots/.

Without Chromium the test skips for a non-root user (`make test` stays usable on a
workstation) and fails for root, as in CI, where hack/install-docs-deps.sh installs it.
"""

from __future__ import annotations

import functools
import os
import re
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from chromium_cdp import Browser, find_chromium
from docs_build import SCREENSHOT_PAGES, SCREENSHOTS, build_site, nav_pages

#: In the page: every image, whether it loaded, and for SVG plots whether they draw any data
#: (the plots give each bar and line an id: bar-*, throughput-*, rss-*).
CHECK_IMAGES = """
(async () => {
  const images = [...document.querySelectorAll('article img')];
  return Promise.all(images.map(async (img) => {
    let marks = null;
    if (img.src.endsWith('.svg')) {
      const text = await (await fetch(img.src)).text();
      marks = (text.match(/id="(bar|throughput|rss)-/g) || []).length;
    }
    return {src: img.getAttribute('src'), loaded: img.complete && img.naturalWidth > 0,
            marks: marks};
  }));
})()
"""
#: In the page: its title and the visible text of its article.
PAGE_TEXT = "[document.title, (document.querySelector('article') || {}).innerText || '']"
#: Words that only an error page or a failed rendering shows. "Error: " only as a word of
#: its own: an exception's name in the prose ("PluginStartError: a folder not writable")
#: is documentation, not a failed rendering.
ERROR_TEXT = {
    "Traceback (most recent call last)": re.compile(re.escape("Traceback (most recent call last)")),
    "404 - Not found": re.compile(re.escape("404 - Not found")),
    "Error: ": re.compile(r"(?<![\w.])Error: "),
    "::: drakit": re.compile(re.escape("::: drakit")),
}


class _Server(ThreadingHTTPServer):
    failed: list[str]
    url: str


class _Handler(SimpleHTTPRequestHandler):
    """Serves the site quietly and records every request it could not answer."""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        assert isinstance(self.server, _Server)
        self.server.failed.append(f"{code} {self.path}")
        super().send_error(code, message, explain)


@pytest.fixture(scope="module")
def server() -> Iterator[_Server]:
    site = build_site().site
    handler = functools.partial(_Handler, directory=str(site))
    served = _Server(("127.0.0.1", 0), handler)
    served.failed = []
    served.url = f"http://127.0.0.1:{served.server_address[1]}/"
    thread = threading.Thread(target=served.serve_forever, daemon=True)
    thread.start()
    try:
        yield served
    finally:
        served.shutdown()
        served.server_close()


@pytest.fixture
def site_url(server: _Server) -> Iterator[str]:
    """The site's address; the test fails if the server could not answer one of its requests."""
    server.failed.clear()
    yield server.url
    assert server.failed == [], "requests the site could not answer"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    binary = find_chromium()
    if binary is None:
        message = "chromium is not installed: hack/install-docs-deps.sh installs it (as root)"
        if os.geteuid() == 0:
            pytest.fail(message)
        pytest.skip(message)
    with Browser(binary) as opened:
        yield opened


def _screenshot(page: str) -> Path:
    """Where the screenshot of ``page`` goes: build/docs-screenshots/<page>.png."""
    return SCREENSHOTS / (page.replace("/", "-").removesuffix(".html") + ".png")


def _problems(browser: Browser, page: str) -> list[str]:
    """What is wrong with ``page`` as the browser shows it."""
    title, text = browser.evaluate(PAGE_TEXT)
    problems = [f"JavaScript: {error}" for error in browser.page_errors()]
    problems += error_markers(text)
    if not text.strip():
        problems.append(f"empty article (title {title!r})")
    for image in browser.evaluate(CHECK_IMAGES):
        if not image["loaded"]:
            problems.append(f"image {image['src']} did not load")
        elif image["marks"] == 0:
            problems.append(f"plot {image['src']} is empty")
    return problems


def error_markers(text: str) -> list[str]:
    """The error markers ``text`` shows, each as a problem."""
    return [f"shows {marker!r}" for marker, found in ERROR_TEXT.items() if found.search(text)]


def test_an_error_marker_is_found_alone_and_not_inside_an_exception_name() -> None:
    assert error_markers("Error: snippet docs/x.py not found") == ["shows 'Error: '"]
    assert error_markers("a failure (PluginStartError: a folder not writable)") == []
    assert error_markers("mkdocstrings.Error: x") == []


def test_every_page_loads_in_chromium_without_errors_or_broken_images(
    site_url: str, browser: Browser
) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    failures = {}
    for page in nav_pages():
        browser.open(site_url + page)
        problems = _problems(browser, page)
        if problems:
            failures[page] = problems
        if page in SCREENSHOT_PAGES:
            browser.screenshot(_screenshot(page))
    assert failures == {}
    for page in SCREENSHOT_PAGES:
        shot = _screenshot(page)
        assert shot.stat().st_size > 10_000, f"{shot} is too small to show the page"


def test_the_benchmarks_page_shows_three_plots_with_data(site_url: str, browser: Browser) -> None:
    browser.open(site_url + "benchmarks.html")
    images = browser.evaluate(CHECK_IMAGES)
    plots = {Path(i["src"]).name: i for i in images}
    assert set(plots) == {"ratios.svg", "scale-nodes.svg", "scale-pods.svg"}
    assert all(i["loaded"] and i["marks"] > 0 for i in plots.values()), plots


def test_the_check_sees_a_missing_image_and_a_javascript_error(
    server: _Server, browser: Browser
) -> None:
    """The checks above can fail: a page with a broken image and a throwing script."""
    broken = build_site().site / "broken-page-for-test.html"
    broken.write_text(
        "<html><head><title>t</title></head><body><article>text"
        '<img src="bench/no-such-plot.svg"></article>'
        "<script>throw new Error('boom')</script></body></html>"
    )
    try:
        browser.open(server.url + broken.name)
        problems = _problems(browser, broken.name)
    finally:
        broken.unlink()
    assert "404 /bench/no-such-plot.svg" in server.failed
    server.failed.clear()
    assert any("no-such-plot.svg did not load" in p for p in problems), problems
    assert any("boom" in p for p in problems), problems
