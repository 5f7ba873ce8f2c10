"""Write the docs site: one ``index.html`` with its CSS and JavaScript inline, nothing fetched at runtime.

Every dataset's page is rendered here, in Python, with every manifest-provided string passed through
:func:`html.escape`; the script only shows, hides and filters elements that already exist (it never
builds markup from data), so a description holding ``<script>`` is shown as text. The page opens from
``file://`` (no JSON is fetched, no CDN, no font from the network) and works the same when served.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable
from html import escape
from importlib import resources
from pathlib import Path

from odfproj.docsite.model import DatasetDoc, GraphLayout, Query, Site
from odfproj.odf.timestamps import format_rfc3339
from odfproj.state.summary import ChainSummary
from odfproj.storage.fsutil import replace_atomic

__all__ = ["INDEX", "anchor", "render_site", "write_site"]

INDEX = "index.html"

_KIND_LABELS = {
    "root": "Root",
    "derivative": "Derivative",
    "external": "external",
    "invalid": "invalid manifest",
}


def write_site(site: Site, out: Path) -> Path:
    """Write the site into the folder ``out`` (created if needed); returns the page's path."""
    out.mkdir(parents=True, exist_ok=True)
    page = out / INDEX
    replace_atomic(page, render_site(site).encode("utf-8"), durable=False)
    return page


def anchor(name: str) -> str:
    """The fragment of a dataset's page (``#ds-NAME``); names are ODF aliases, so no escaping is lost."""
    return "ds-" + name


def _e(text: object) -> str:
    return escape(str(text), quote=True)


def _asset(name: str) -> str:
    return (resources.files("odfproj") / "resources" / "docsite" / name).read_text(encoding="utf-8")


def render_site(site: Site) -> str:
    sections = "\n".join(_dataset_section(d) for d in site.datasets)
    # The list is for finding a name, so alphabetical; the graph and the overview keep lineage order.
    items = "\n".join(_list_item(d) for d in sorted(site.datasets, key=lambda d: d.name.lower()))
    title = f"{site.project} · odfproj docs"
    script = _asset("site.js")
    # Only this script may run: were a manifest string ever to slip through unescaped, its script would not.
    script_hash = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode()
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{script_hash}'; img-src data:">
<title>{_e(title)}</title>
<style>
{_asset("site.css")}
</style>
</head>
<body>
<aside id="sidebar">
  <a class="brand" href="#overview"><span class="logo">◆</span> {_e(site.project)}</a>
  <input id="search" type="search" placeholder="Search datasets, keywords…" autocomplete="off" aria-label="Search datasets by name or keyword">
  <p id="search-count" class="muted">{len(site.datasets)} dataset(s)</p>
  <ul id="datasets">
{items}
  </ul>
</aside>
<main>
  <section id="lineage-panel" aria-label="Lineage">
    <div class="panel-head"><h2>Lineage</h2><span class="legend">{_legend()}</span></div>
    <div class="graph-scroll">{_svg(site.layout)}</div>
  </section>
{_overview(site)}
{sections}
</main>
<script>{script}</script>
</body>
</html>
"""


def _legend() -> str:
    return "".join(
        f'<span class="chip {kind}">{_e(label)}</span>'
        for kind, label in _KIND_LABELS.items()
        if kind != "invalid"
    )


def _list_item(doc: DatasetDoc) -> str:
    search = " ".join([doc.name, *doc.keywords, doc.kind]).lower()
    keywords = "".join(f'<span class="kw">{_e(k)}</span>' for k in doc.keywords)
    return (
        f'    <li data-search="{_e(search)}" data-name="{_e(doc.name)}">'
        f'<a href="#{_e(anchor(doc.name))}"><span class="dot {_e(doc.kind)}"></span>'
        f'<span class="name">{_e(doc.name)}</span></a>'
        f"{f'<div class=kws>{keywords}</div>' if keywords else ''}</li>"
    )


def _svg(layout: GraphLayout) -> str:
    parts = [
        f'<svg id="lineage" xmlns="http://www.w3.org/2000/svg" width="{layout.width:.0f}" '
        f'height="{layout.height:.0f}" viewBox="0 0 {layout.width:.0f} {layout.height:.0f}" role="img" '
        'aria-label="Dataset lineage graph">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" class="arrowhead"/></marker></defs>',
    ]
    for edge in layout.edges:
        parts.append(
            f'<path class="edge" data-source="{_e(edge.source)}" data-target="{_e(edge.target)}" '
            f'd="{edge.d}" marker-end="url(#arrow)"/>'
        )
    for node in layout.nodes:
        parts.append(
            f'<a class="node {_e(node.kind)}" href="#{_e(anchor(node.name))}" data-name="{_e(node.name)}">'
            f"<title>{_e(node.name)} ({_e(_KIND_LABELS.get(node.kind, node.kind))})</title>"
            f'<rect x="{node.x:.1f}" y="{node.y:.1f}" width="{node.width:.1f}" height="{node.height:.1f}" '
            f'rx="{8 if node.kind == "derivative" else 4}"/>'
            f'<text x="{node.x + node.width / 2:.1f}" y="{node.y + node.height / 2:.1f}">{_e(node.name)}</text></a>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _overview(site: Site) -> str:
    counts: dict[str, int] = {}
    for doc in site.datasets:
        counts[doc.kind] = counts.get(doc.kind, 0) + 1
    ran = sum(1 for d in site.datasets if d.state is not None)
    stats = "".join(
        f'<div class="stat"><b>{n}</b><span>{_e(_KIND_LABELS.get(k, k))}</span></div>'
        for k, n in sorted(counts.items(), key=lambda kv: list(_KIND_LABELS).index(kv[0]))
    )
    stats += f'<div class="stat"><b>{ran}</b><span>in the workspace</span></div>'
    tests = [t for d in site.datasets for t in d.tests]
    if tests:
        failed = sum(1 for t in tests if t.status.lower() not in ("pass", "passed", "success"))
        stats += f'<div class="stat{" bad" if failed else ""}"><b>{len(tests) - failed}/{len(tests)}</b><span>tests passed</span></div>'
    never = (
        '<p class="notice">The workspace has no data yet: this site shows the definitions only. '
        "Run <code>odfproj run</code>, then build the docs again.</p>"
        if ran == 0
        else ""
    )
    last_run = (
        f"<p class=muted>Last run started {_e(site.run_started_at)}.</p>" if site.run_started_at else ""
    )
    warnings = _list("warnings", site.warnings, "Warnings")
    rows = "".join(
        f'<tr><td><a href="#{_e(anchor(d.name))}">{_e(d.name)}</a></td>'
        f'<td><span class="chip {_e(d.kind)}">{_e(_KIND_LABELS.get(d.kind, d.kind))}</span></td>'
        f"<td>{_e(d.description or '')}</td>"
        f"<td class=num>{_rows_text(d)}</td><td>{_watermark(d.state.chain) if d.state else ''}</td></tr>"
        for d in site.datasets
    )
    return f"""  <section id="overview" class="page">
    <h1>{_e(site.project)}</h1>
    <p class="muted">Generated {_e(site.generated_at)}{f" for target {_e(site.target)}" if site.target else ""} from the workspace {_e(site.workspace)}.</p>
    {last_run}{never}
    <div class="stats">{stats}</div>
    {warnings}
    <table class="grid"><thead><tr><th>Dataset</th><th>Kind</th><th>Description</th><th class=num>Rows</th><th>Watermark</th></tr></thead>
    <tbody>{rows}</tbody></table>
  </section>"""


def _watermark(chain: ChainSummary) -> str:
    return _e(format_rfc3339(chain.watermark)) if chain.watermark else ""


def _rows_text(doc: DatasetDoc) -> str:
    if doc.state is None:
        return "—"
    rows = doc.state.current_rows if doc.state.current_rows is not None else doc.state.chain.records
    return f"{rows:,}"


def _list(css: str, items: Iterable[str], title: str) -> str:
    items = list(items)
    if not items:
        return ""
    lis = "".join(f"<li>{_e(i)}</li>" for i in items)
    return f'<div class="{css}"><h3>{_e(title)}</h3><ul>{lis}</ul></div>'


def _dataset_section(doc: DatasetDoc) -> str:
    kind = _KIND_LABELS.get(doc.kind, doc.kind)
    keywords = "".join(f'<span class="kw">{_e(k)}</span>' for k in doc.keywords)
    description = (
        f'<p class="description">{_e(doc.description)}</p>'
        if doc.description
        else '<p class="description muted">No description (add a <code>SetInfo</code> event).</p>'
    )
    manifest = f"<code>{_e(doc.manifest)}</code>" if doc.manifest else "not defined by this project"
    return f"""  <section id="{_e(anchor(doc.name))}" class="page dataset" data-name="{_e(doc.name)}" hidden>
    <div class="title"><h1>{_e(doc.name)}</h1><span class="chip {_e(doc.kind)}">{_e(kind)}</span></div>
    {description}
    <div class="kws">{keywords}</div>
    {_list("problems", doc.problems, "Manifest problems")}
    <div class="cards">
      {_card("Definition", _definition(doc, manifest))}
      {_card("Data", _data(doc))}
      {_card("Inputs and outputs", _io(doc))}
    </div>
    {_card("Schema", _schema(doc), wide=True)}
    {"".join(_card(_query_title(q), _query(q), wide=True) for q in doc.queries)}
    {_card("Data tests", _tests(doc), wide=True) if doc.tests else ""}
    {_card("Last blocks", _blocks(doc), wide=True) if doc.state else ""}
  </section>"""


def _card(title: str, body: str, *, wide: bool = False) -> str:
    return f'<div class="card{" wide" if wide else ""}"><h2>{_e(title)}</h2>{body}</div>'


def _dl(pairs: Iterable[tuple[str, str]]) -> str:
    return "<dl>" + "".join(f"<dt>{_e(k)}</dt><dd>{v}</dd>" for k, v in pairs) + "</dl>"


def _definition(doc: DatasetDoc, manifest: str) -> str:
    pairs = [("Manifest", manifest)]
    if doc.license is not None:
        lic = doc.license
        spdx = f" (SPDX {_e(lic.spdx_id)})" if lic.spdx_id else ""
        pairs.append(
            (
                "License",
                f"{_e(lic.short_name)}: {_e(lic.name)}{spdx}<br><span class=url>{_e(lic.website_url)}</span>",
            )
        )
    else:
        pairs.append(("License", '<span class="muted">none declared</span>'))
    if doc.state is not None:
        pairs.append(("Id", f"<code class=small>{_e(doc.state.chain.dataset_id)}</code>"))
        if doc.state.chain.primary_key:
            pairs.append(("Primary key", _e(", ".join(doc.state.chain.primary_key))))
    return _dl(pairs)


def _data(doc: DatasetDoc) -> str:
    state = doc.state
    if state is None:
        return '<p class="muted">Not in the workspace yet: never run.</p>' + _last_run(doc)
    pairs = [
        (
            "Rows now",
            f"{state.current_rows:,}"
            if state.current_rows is not None
            else '<span class="muted">n/a (no primary key)</span>',
        ),
        ("Records", f"{state.chain.records:,} in the changelog"),
        ("Watermark", _watermark(state.chain) or '<span class="muted">none</span>'),
        ("Blocks", f"{state.chain.blocks:,}"),
        ("Head", f"<code class=small>{_e(state.chain.head)}</code>"),
        *_last_update(doc),
    ]
    return _dl(pairs) + _last_run(doc)


def _last_update(doc: DatasetDoc) -> list[tuple[str, str]]:
    """The path a derivative's last update took, why full, its query's mode when other, the hint."""
    update = doc.last_update
    if update is None:
        return []
    full = update.path == "full"
    path = f"<b>{_e(update.path)}</b>" + (f" ({_e(update.why_full)})" if full and update.why_full else "")
    if update.updated_at:
        path += f' <span class="muted">at {_e(update.updated_at)}</span>'
    pairs = [("Last update", path)]
    if (
        update.mode
        and update.mode != update.path
        and not (full and update.mode == f"full: {update.why_full}")
    ):
        pairs.append(("Mode", _e(update.mode)))
    if update.hint:
        pairs.append(("Hint", _e(update.hint)))
    return pairs


def _last_run(doc: DatasetDoc) -> str:
    run = doc.last_run
    if run is None:
        return ""
    seconds = f" in {run.seconds:.1f}s" if run.seconds is not None else ""
    records = f", {run.records_added:,} record(s) added" if run.records_added else ""
    message = f": {_e(run.message)}" if run.message else ""
    return (
        f'<p class="run {_e(run.status)}">Last run: <b>{_e(run.status)}</b> '
        f"{f'({_e(run.work)})' if run.work else ''}{seconds}{records}{message}</p>"
    )


def _io(doc: DatasetDoc) -> str:
    def links(names: Iterable[tuple[str, str | None]]) -> str:
        out = [
            f'<li><a href="#{_e(anchor(n))}">{_e(n)}</a>{f" <span class=muted>as {_e(a)}</span>" if a else ""}</li>'
            for n, a in names
        ]
        return f"<ul class=links>{''.join(out)}</ul>" if out else '<p class="muted">none</p>'

    return f"<h3>Inputs</h3>{links(doc.inputs)}<h3>Read by</h3>{links((o, None) for o in doc.outputs)}"


def _schema(doc: DatasetDoc) -> str:
    if not doc.schema:
        return '<p class="muted">Not known yet: the schema is written by the first run.</p>'
    source = (
        "as written by the last run"
        if doc.schema_source == "chain"
        else "as the read step declares it (before the first run)"
    )
    rows = "".join(
        f"<tr><td><code>{_e(c.name)}</code></td><td><code>{_e(c.type)}</code></td></tr>" for c in doc.schema
    )
    return f'<p class="muted">{_e(source)}</p><table class="grid schema"><thead><tr><th>Column</th><th>Type</th></tr></thead><tbody>{rows}</tbody></table>'


def _query_title(query: Query) -> str:
    return "Transform SQL" if query.role == "transform" else "Preprocess SQL"


def _query(query: Query) -> str:
    engine = query.engine.strip().lower()
    note = (
        f'<p class="muted">Written for {_e(query.engine)}; shown as Spark runs it.</p>'
        if engine != "spark" and query.error is None
        else ""
    )
    if query.error:
        note = f'<p class="problem">{_e(query.error)}</p>'
    steps = []
    for step in query.steps:
        label = f'<div class="alias">{_e(step.alias)}</div>' if step.alias else ""
        original = (
            f"<details><summary>as written ({_e(query.engine)})</summary><pre><code>{_e(step.source.strip())}</code></pre></details>"
            if step.source.strip() != step.spark.strip()
            else ""
        )
        steps.append(f"{label}<pre class=sql><code>{_e(step.spark.strip())}</code></pre>{original}")
    return note + "".join(steps)


def _tests(doc: DatasetDoc) -> str:
    rows = "".join(
        f'<tr class="{_e(_test_class(t.status))}"><td>{_e(t.name)}</td><td><b>{_e(t.status)}</b></td><td>{_e(t.message)}</td></tr>'
        for t in doc.tests
    )
    return f'<table class="grid tests"><thead><tr><th>Test</th><th>Status</th><th>Message</th></tr></thead><tbody>{rows}</tbody></table>'


def _test_class(status: str) -> str:
    status = status.lower()
    if status in ("pass", "passed", "success"):
        return "pass"
    if status in ("warn", "warning"):
        return "warn"
    return "fail"


def _blocks(doc: DatasetDoc) -> str:
    assert doc.state is not None
    rows = "".join(
        f"<tr><td class=num>{b.sequence_number}</td><td>{_e(b.event)}</td><td>{_e(b.system_time)}</td>"
        f"<td><code class=small>{_e(b.block_hash)}</code></td></tr>"
        for b in doc.state.last_blocks
    )
    return (
        '<table class="grid"><thead><tr><th class=num>#</th><th>Event</th><th>System time</th><th>Hash</th></tr>'
        f"</thead><tbody>{rows}</tbody></table>"
    )
