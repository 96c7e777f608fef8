"""`conform site`: pages, escaping, lazy data, page sizes, and the built site in a real browser."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from click.testing import CliRunner

import sitedata
from conform.cli.site import site_command
from conform.store import Store
from conform.timing.changes import describe_rule, interval, is_change
from conform.website.build import build_site

MAX_PAGE = 2_000_000


def add_declared(store: Store) -> None:
    """Two releases, stored out of version order: 2.14.1 declares a CPU kernel for add.Tensor
    (which fails on the measured 2.14.1 CPU: declared but failing), sum only decomposes (passes:
    by decomposition), new_op_in_214 is not in its yaml (undeclared); 2.9.1 has fewer kernels."""
    from conform.report.declared import DeclaredRelease

    k214 = {"aten::add.Tensor": {"CPU": "kernel", "CUDA": "kernel", "MPS": "kernel"}, "aten::mm": {"CPU": "kernel", "CUDA": "kernel"},
            "aten::relu": {"CPU": "kernel", "MPS": "kernel"}, "aten::sum": {"CompositeImplicitAutograd": "composite_implicit"},
            "aten::size.int": {}, "aten::Size": {"CompositeExplicitAutograd": "composite_explicit"}}  # fmt: skip
    k291 = {
        "aten::add.Tensor": {"CPU": "kernel", "CUDA": "kernel"},
        "aten::mm": {"CPU": "kernel"},
        "aten::sum": {"CompositeImplicitAutograd": "composite_implicit"},
    }
    for version, kernels in (("2.14.1", k214), ("2.9.1", k291)):
        release = DeclaredRelease(
            torch_version=version,
            torch_git=f"git{version}",
            source="test",
            platform="any",
            yaml_sha256="0",
            kernels=kernels,
        )
        store.record_declared(release.environment(), kernels)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("site")
    store = sitedata.make_two_versions(tmp / "c.db")
    add_declared(store)
    # a later partial run of 2.14.1: its cell replaces the first run's (the site says which run)
    sitedata.add_run(
        store, sitedata.env("2.14.1", device=sitedata.EVIL_DEVICE), sitedata.OPS_214, {("aten::sum", "int64"): "pass"}
    )
    store.close()
    store = Store(tmp / "c.db", readonly=True)
    stats = build_site(store, tmp / "out")
    store.close()
    return tmp / "out", stats


class Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.refs: list[str] = []

    def handle_starttag(self, tag, attrs):
        for k, v in attrs:
            if k in ("href", "src") and v:
                self.refs.append(v)


def local_target(page: Path, ref: str) -> Path | None:
    """The file a local link needs: op.html?op=X needs data/op/X.js as well as op.html."""
    parts = urlsplit(ref)
    if parts.scheme or ref.startswith("#") or not parts.path:
        return None
    target = (page.parent / unquote(parts.path)).resolve()
    if target.name == "op.html" and target.is_file():
        op = dict(q.split("=", 1) for q in parts.query.split("&") if "=" in q).get("op")
        return target.parent / "data" / "op" / f"{unquote(op or '')}.js"
    return target


def test_every_page_is_built(site):
    out, stats = site
    for rel in (
        "index.html",
        "matrix.html",
        "diff.html",
        "perf.html",
        "op.html",
        "declared.html",
        "data/op/add.Tensor.js",
        "data/op/mm.js",
        "data/op/new_op_in_214.js",
        "static/conform.js",
        "static/style.css",
        "data/index.js",
    ):
        assert (out / rel).is_file(), rel
    assert stats.environments == 2
    assert list(out.glob("diff-*-*.html")), "no precomputed diff of neighbouring environments"


def test_ops_differing_only_in_case_get_distinct_data_files(site):
    out, _ = site
    files = list((out / "data/op").iterdir())
    assert len({p.name.lower() for p in files}) == len(files) == len(sitedata.OPS_214)


def test_database_strings_are_escaped(site):
    out, _ = site
    for f in (out / "data").rglob("*.js"):
        assert "<" not in f.read_text(), f"{f.name} holds a raw '<'"
    assert "\\u003cscript>window.__pwned" in (out / "data/op/add.Tensor.js").read_text()
    for page in ("index.html", "matrix.html", "diff.html", next(out.glob("diff-*-*.html")).name):
        text = (out / page).read_text()
        assert "<script>window.__pwned" not in text, page
        assert "&lt;script&gt;window.__pwned = 3&lt;/script&gt;" in text, page  # the device name, as text


def test_matrix_data_is_lazy_and_chunked(site):
    out, _ = site
    matrix = (out / "matrix.html").read_text()
    assert "aten::add.Tensor" not in matrix  # rows come from data files, loaded when needed
    assert {p.name for p in (out / "data").glob("matrix-*.js")} >= {
        "matrix-pointwise.js",
        "matrix-linalg.js",
        "matrix-shape.js",
    }
    assert 'window.CONFORM_DATA["matrix-linalg"]' in (out / "data/matrix-linalg.js").read_text()


def test_no_page_over_2mb_and_no_remote_assets(site):
    out, _ = site
    for p in out.rglob("*"):
        if p.is_file():
            assert p.stat().st_size < MAX_PAGE, p
        if p.suffix == ".html":
            text = p.read_text()
            assert not re.search(r'(src|href)="(https?:)?//', text), f"{p} loads a remote asset"


def test_static_links_resolve(site):
    out, _ = site
    broken = []
    for page in out.rglob("*.html"):
        parser = Links()
        parser.feed(page.read_text())
        for ref in parser.refs:
            target = local_target(page, ref)
            if target is not None and not target.is_file():
                broken.append(f"{page.relative_to(out)} -> {ref}")
    assert not broken


def test_diff_and_timings_are_shown(site):
    out, _ = site
    diff = next(out.glob("diff-*-*.html")).read_text()
    assert re.search(r'id="n-newly-failing">1<', diff) and re.search(r'id="n-newly-passing">1<', diff)
    assert re.search(r'id="n-new-ops">1<', diff) and re.search(r'id="n-regressions">3<', diff)
    assert "<svg" in (out / "data/op/mm.js").read_text().replace("\\u003c", "<")


def test_the_sites_timing_rule_is_the_gates(site):
    """The diff pages count a timing change as `conform gate` does (conform.timing.changes): the
    JavaScript the build writes agrees with is_change, including at the edges."""
    out, _ = site
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the JavaScript rule is not run")
    cases = [
        (old, old_iqr, new, new_iqr)
        for old in (0.0, 1e-4, 1.0)
        for new in (0.0, 0.9, 0.95, 1.05, 1.1, 1.11, 1.5, 3.0, 1e-4)
        for old_iqr in (0.0, 0.05, 0.2, None)
        for new_iqr in (0.0, 0.3, None)
    ]
    script = (out / "data/timing-rule.js").read_text()
    run = f"var window = {{}};\n{script}\nvar f = window.CONFORM_DATA['timing-rule'].significant;\n"
    # the pages hand the rule [median, low, high] of each side, as conform.timing.changes.interval makes them
    sides = [[[c[0], *(interval(c[0], c[1]) or (0, 0))], [c[2], *(interval(c[2], c[3]) or (0, 0))]] for c in cases]
    run += f"console.log(JSON.stringify({json.dumps(sides)}.map(c => f(c[0], c[1]))));"
    got = json.loads(subprocess.run([node, "-e", run], capture_output=True, text=True, check=True).stdout)
    assert got == [is_change(*c) for c in cases]
    assert any(got) and not all(got)
    # the precomputed diff page: mm 3x slower (no spread stored) is a regression by the same rule
    diff = next(out.glob("diff-*-*.html")).read_text()
    assert describe_rule() in diff and re.search(r'id="n-improvements">0<', diff)


def test_declared_page_lists_releases_in_version_order_and_declared_but_failing(site):
    out, _ = site
    page = (out / "declared.html").read_text()
    assert re.findall(r'<tr data-version="([^"]+)"', page) == ["2.9.1", "2.14.1"]  # 2.9 < 2.14, though stored after it
    assert "<svg" in page and page.count("<polyline") == 8  # 4 keys, kernels and incl. composite
    row = re.search(r'<tr data-version="2.14.1">(.*?)</tr>', page, re.S).group(1)
    assert re.findall(r'data-sort="(\d+)"', row)[1:5] == ["2", "2", "3", "0"]  # MPS, CUDA, CPU, XPU kernels
    # the measured 2.14.1 CPU: add.Tensor fails though its release declares a CPU kernel
    env_page = next(p for p in out.glob("declared-*.html") if "2.14.1" in p.read_text().split("</h1>")[0])
    text = env_page.read_text()
    failing = text.split('id="failing"')[1].split('id="composite"')[0]
    assert "aten::add.Tensor" in failing and "mismatch" in failing and "aten::mm" not in failing
    assert "aten::sum" in text.split('id="composite"')[1].split('id="undeclared"')[0]
    assert "aten::new_op_in_214" in text.split('id="undeclared"')[1]
    assert "no declared release" in (out / "index.html").read_text()  # the 2.13.0 column has none


def test_site_agrees_with_the_declared_command(site):
    """conform.report.declared's pure functions decide for both; what can differ is what they are given:
    the site's rows, read in bulk with the newest cell of each environment kept by site_data.load,
    against the command's, read per environment by conform.store.queries."""
    from conform.report import declared
    from conform.website import data as site_data

    out, _ = site
    store = Store(out.parent / "c.db", readonly=True)
    try:
        data = site_data.load(store)
        by_env = site_data.declared_by_env(data)
        assert site_data.declared_coverage(data, by_env) == declared.declared_coverage(store)
        for e in data.envs:
            mine, ref = site_data.declared_vs_measured(data, by_env, e), declared.declared_vs_measured(store, e.id)
            if ref is None:
                assert mine is None
                continue
            name = lambda i: data.ops[i].qualname  # noqa: E731
            assert mine["declared"].id == ref["declared_environment_id"] and mine["dispatch_key"] == ref["dispatch_key"]
            assert {name(i): v for i, v in mine["declared_failing"].items()} == ref["declared_failing"]
            assert {name(i): v for i, v in mine["composite_passing"].items()} == ref["composite_passing"]
            assert [name(i) for i in mine["undeclared_measured"]] == ref["undeclared_measured"]
    finally:
        store.close()


def test_empty_database_builds_a_site_that_says_so(tmp_path):
    Store(tmp_path / "empty.db").close()
    r = CliRunner().invoke(site_command, ["--db", str(tmp_path / "empty.db"), "--out", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    assert "No measured runs" in (tmp_path / "out/index.html").read_text()
    assert "No timings in this database" in (tmp_path / "out/perf.html").read_text()


# -- in a real browser ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def chromium():
    from browser import find_chromium

    binary = find_chromium()
    if binary is None:
        pytest.skip("chromium is not installed (apt-get install chromium): browser tests skipped")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=binary, args=["--disable-dev-shm-usage"])
        yield browser
        browser.close()


@pytest.fixture
def page(chromium):
    """A fresh 1400 x 900 page per test; `page.errors` lists its console errors, uncaught
    exceptions and failed loads."""
    from browser import open_page

    page, errors = open_page(chromium)
    page.errors = errors
    yield page
    page.close()


def test_matrix_filters_in_browser(site, page, tmp_path):
    out, _ = site
    page.goto((out / "matrix.html").as_uri())
    ready = "document.getElementById('matrix').getAttribute('data-ready')"
    page.wait_for_function(ready)
    visible = "Array.from(document.querySelectorAll('tbody.family:not([hidden]):not(.collapsed) tr.oprow')).map(r => r.dataset.op)"

    def act(action, *args):
        """What a user does to one control, then the matrix's re-rendering it starts."""
        before = page.evaluate(ready)
        action(*args)
        page.wait_for_function(f"before => {ready} !== before", arg=before)
        return page.evaluate(visible)

    assert page.evaluate(visible) == ["aten::add.Tensor", "aten::new_op_in_214"]  # first family open by default
    assert act(page.fill, "#f-text", "SUM") == ["aten::sum"]
    act(page.fill, "#f-text", "")
    assert sorted(act(page.select_option, "#f-outcome", "mismatch")) == ["aten::add.Tensor", "aten::mm"]
    act(page.select_option, "#f-outcome", "")
    assert act(page.select_option, "#f-family", "linalg") == ["aten::mm"]
    act(page.select_option, "#f-family", "")
    rows = act(page.check, "#f-changed")
    assert sorted(rows) == ["aten::add.Tensor", "aten::mm"]  # rows whose outcome changed stand out
    assert page.evaluate("document.querySelectorAll('tr.oprow.changed').length") == 2
    assert "changed=1" in page.evaluate("location.hash")
    # every link the script made resolves
    hrefs = page.evaluate("Array.from(document.querySelectorAll('#matrix a[href]')).map(a => a.getAttribute('href'))")
    assert hrefs and all(local_target(out / "matrix.html", h).is_file() for h in hrefs)
    # a row's first cell is compared with nothing to its left (it was compared with the row above)
    act(page.uncheck, "#f-changed")
    act(page.click, "#expand-all")
    first = page.evaluate(
        "Array.from(document.querySelectorAll('tr.oprow')).map(r => r.querySelector('td.cell').className)"
    )
    assert first and not [c for c in first if "diffprev" in c]
    assert (
        page.evaluate("document.querySelectorAll('tr.oprow td.cell.diffprev').length") == 2
    )  # add.Tensor and mm, in the 2.14.1 column
    # each cell says which run its results came from; sum int64 came from the later run
    per_cell = "rows => Object.fromEntries(rows.map(r => [r.dataset.op, [...r.querySelectorAll('td.cell')].map(CELL)]))"
    tips = page.locator("tr.oprow").evaluate_all(per_cell.replace("CELL", "c => c.title"))
    assert re.search(r"from run \w{8} of \d{4}-\d\d-\d\d", tips["aten::mm"][1])
    assert re.search(r"float32: pass · run (\w{8}).*\nint64: pass · run (?!\1)\w{8}", tips["aten::sum"][1]), tips[
        "aten::sum"
    ][1]
    # the declared toggle: a letter per cell; add.Tensor's declared CPU kernel fails on 2.14.1
    act(page.check, "#f-declared")
    marks = page.locator("tr.oprow").evaluate_all(
        per_cell.replace("CELL", "c => (c.querySelector('.decl') || {}).className || ''")
    )
    assert marks["aten::add.Tensor"] == ["", "decl decl-K decl-broken"]  # 2.13.0: no release stored
    assert marks["aten::sum"][1] == "decl decl-D" and marks["aten::new_op_in_214"][1] == "decl decl-none"
    page.screenshot(path=tmp_path / "matrix.png")
    assert (tmp_path / "matrix.png").stat().st_size > 10_000
    assert page.errors == []


def test_pages_load_without_console_errors(site, page):
    out, _ = site
    for rel in [
        "index.html",
        "perf.html",
        "diff.html",
        "declared.html",
        next(out.glob("declared-*.html")).name,
        "op.html?op=add.Tensor",
        "op.html?op=mm",
        "op.html?op=relu",
        next(out.glob("diff-*-*.html")).name,
    ]:
        page.goto((out / "index.html").as_uri().replace("index.html", rel))
        if rel.startswith("op.html"):
            page.wait_for_function("document.getElementById('op-page').getAttribute('data-ready')")
        assert page.errors == [], rel
        assert page.evaluate("window.__pwned") is None, f"{rel} ran a script from the database"
        page.evaluate(
            "document.querySelector('table.sortable th') && document.querySelector('table.sortable th').click()"
        )  # sorting does not throw
        assert page.errors == [], rel


def test_op_page_shows_results_failures_and_timings(site, page):
    out, _ = site
    op_ready = "document.getElementById('op-page').getAttribute('data-ready')"
    page.goto((out / "op.html").as_uri() + "?op=add.Tensor")
    page.wait_for_function(op_ready)
    text = page.evaluate("document.getElementById('op-page').innerText")
    assert "aten::add.Tensor" in text and "Reproduction script" in text and "changed" in text
    assert "<script>window.__pwned = 1</script>" in text  # the message shows as text, not as markup
    assert page.evaluate("document.querySelectorAll('section.failure').length") == 1
    # the cell's further failure, under its failure, with its own script (the message as text)
    assert "further failure:" in text and f"a further failure {sitedata.EVIL}" in text
    assert page.evaluate("document.querySelectorAll('section.failure .further details.repro pre').length") == 1
    assert "No timings for this op" in text
    declared = page.evaluate(
        "Array.from(document.querySelectorAll('table.declared-op tr')).map(r => r.innerText.replace(/\\s+/g, ' ').trim())"
    )
    assert declared == ["torch MPS CUDA CPU XPU", "2.9.1 – kernel kernel –", "2.14.1 kernel kernel kernel –"]
    page.goto((out / "op.html").as_uri() + "?op=mm")
    page.wait_for_function(op_ready)
    assert page.evaluate("document.querySelectorAll('#op-page svg.chart circle').length") >= 6
    assert page.errors == []
    page.goto((out / "op.html").as_uri() + "?op=no_such_op")
    page.wait_for_function("document.getElementById('op-page').innerText.includes('No op')")
    assert page.errors and all("no_such_op" in e for e in page.errors)  # only the failed load of its data file


def test_diff_of_any_two_matches_the_precomputed_one(site, page):
    out, _ = site
    static = next(out.glob("diff-*-*.html"))
    a, bkey = re.search(r'data-a="([^"]+)" data-b="([^"]+)"', static.read_text()).groups()
    expected = {k: v for k, v in re.findall(r'id="n-([a-z-]+)">(\d+)<', static.read_text())}
    page.goto((out / "diff.html").as_uri() + f"#a={a}&b={bkey}")
    page.wait_for_function("document.getElementById('diff-out').getAttribute('data-ready')")
    got = page.evaluate(
        "Object.fromEntries(Array.from(document.querySelectorAll('#diff-out b[id^=n-]')).map(x => [x.id.slice(2), x.textContent]))"
    )
    assert got == expected
    assert page.evaluate("document.getElementById('diff-out').textContent").count("aten::add.Tensor") >= 1
    assert page.errors == []


def test_site_files_is_a_real_folder_with_templates_and_assets():
    """Installed, site/ is the namespace package conform.sitefiles; importlib.resources gives a
    MultiplexedPath there whose str() is no path (`conform site` failed on a pip-installed conform)."""
    from pathlib import Path

    from conform.website.build import site_files

    root = site_files()
    assert isinstance(root, Path) and root.is_dir()
    assert (root / "templates" / "base.html").is_file() and (root / "static" / "style.css").is_file()


def test_overview_table_fits_a_1400_px_window(site, page):
    """Every column of the overview (per-outcome counts included) is visible without scrolling."""
    out, _ = site
    page.goto((out / "index.html").as_uri())
    width = page.evaluate("document.documentElement.clientWidth")
    box = page.locator("#overview").evaluate(
        "t => [t.parentElement.scrollWidth, t.parentElement.clientWidth, t.getBoundingClientRect().right]"
    )
    assert width == 1400 and box[0] <= box[1] and box[2] <= width, (width, box)
