"""The docs site in a real headless Chromium (Debian's package), driven over the DevTools Protocol.

The page is opened from ``file://`` as a user opens it after ``odfproj docs build``. Each test saves
a screenshot in its own tmp_path and prints where (``pytest -s`` shows it).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from odfproj.docsite.collect import collect_site
from odfproj.docsite.html import write_site
from odfproj.project.config import load_project
from tests.docsite.chromium import INSTALL_HINT, Browser, chromium_binary
from tests.docsite.projects import DAILY, HOSTILE, ORDERS, REGIONS, add_orders_data, write_shop


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The file:// URL of the shop project's site: orders has data and a passed test, the rest never ran."""
    root = tmp_path_factory.mktemp("docsite")
    shop = write_shop(root / "shop")
    add_orders_data(shop, root / "scratch")
    results = {
        "results": [
            {"unique_id": ORDERS, "status": "success", "tests": [{"name": "not_null(id)", "status": "pass"}]}
        ]
    }
    (shop / ".odf" / "run_results.json").write_text(json.dumps(results))
    page = write_site(collect_site(load_project(shop)), root / "site")
    return page.as_uri()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    chromium = Browser(tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield chromium
    finally:
        chromium.close()


def screenshot(browser: Browser, tmp_path: Path, name: str) -> None:
    path = browser.screenshot(tmp_path / f"{name}.png")
    assert path.stat().st_size > 10_000
    print(f"screenshot: {path}")


def test_the_page_loads_without_errors_and_the_lineage_graph_renders(
    browser: Browser, site: str, tmp_path: Path
) -> None:
    browser.open(site)
    boxes = browser.evaluate(
        "Array.from(document.querySelectorAll('#lineage .node')).map(n => {"
        " const b = n.querySelector('rect').getBBox(); return [n.dataset.name, b.width, b.height]; })"
    )
    assert sorted(name for name, _, _ in boxes) == sorted([ORDERS, REGIONS, DAILY])
    assert all(width > 100 and height > 20 for _, width, height in boxes)
    assert browser.evaluate("document.querySelectorAll('#lineage path.edge').length") == 2
    assert browser.evaluate("document.getElementById('overview').hidden") is False
    screenshot(browser, tmp_path, "overview")
    assert browser.errors() == []


def test_clicking_a_node_of_the_graph_opens_that_dataset(browser: Browser, site: str, tmp_path: Path) -> None:
    browser.open(site)
    x, y = browser.evaluate(
        f"(() => {{ const b = document.querySelector('#lineage .node[data-name=\"{REGIONS}\"] rect')"
        ".getBoundingClientRect(); return [b.x + b.width / 2, b.y + b.height / 2]; })()"
    )
    browser.click(x, y)
    assert browser.evaluate("decodeURIComponent(location.hash)") == f"#ds-{REGIONS}"
    shown = browser.settled(
        "Array.from(document.querySelectorAll('main section.page')).filter(s => !s.hidden).map(s => s.id)",
        [f"ds-{REGIONS}"],
    )
    assert shown == [f"ds-{REGIONS}"]
    assert browser.settled(
        f"document.querySelector('#lineage .node[data-name=\"{REGIONS}\"]').classList.contains('selected')",
        True,
    )
    screenshot(browser, tmp_path, "regions")
    assert browser.errors() == []


def test_the_search_box_finds_a_dataset_by_keyword(browser: Browser, site: str, tmp_path: Path) -> None:
    browser.open(site)
    browser.evaluate("document.getElementById('search').focus()")
    browser.type_text("geography")
    visible = browser.evaluate(
        "Array.from(document.querySelectorAll('#datasets li')).filter(li => !li.hidden).map(li => li.dataset.name)"
    )
    assert visible == [REGIONS]
    assert browser.evaluate("document.getElementById('search-count').textContent") == "1 of 3 dataset(s)"
    browser.press_enter()
    assert browser.evaluate("decodeURIComponent(location.hash)") == f"#ds-{REGIONS}"
    screenshot(browser, tmp_path, "search")
    assert browser.errors() == []


def test_a_script_in_a_description_stays_text(browser: Browser, site: str, tmp_path: Path) -> None:
    browser.open(f"{site}#ds-{ORDERS}")
    assert browser.evaluate("typeof window.pwned") == "undefined"
    section = f"document.getElementById('ds-{ORDERS}')"
    assert browser.evaluate(f"{section}.hidden") is False
    assert browser.evaluate(f"{section}.querySelector('.description').textContent") == HOSTILE
    assert browser.evaluate(f"{section}.querySelectorAll('script, img').length") == 0
    assert browser.evaluate(f"{section}.textContent.includes('5 in the changelog')")
    screenshot(browser, tmp_path, "orders")
    assert browser.errors() == []


def test_without_chromium_the_tests_fail_with_one_line_saying_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(pytest.fail.Exception) as failed:
        chromium_binary()
    assert str(failed.value) == INSTALL_HINT and "\n" not in INSTALL_HINT
    assert "apt-get install --no-install-recommends chromium" in INSTALL_HINT
