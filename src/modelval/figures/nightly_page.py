"""The nightly's page: one self-contained HTML file rendered from ``report.json`` (:mod:`modelval.api.report`).

Self-contained: the CSS, the small sorting and filtering script and the trend figures (SVG) are inline; the only
files it refers to are the thumbnails beside it. Deterministic: the page is a function of the data alone (no
clock, no random ids, every float formatted), so rendering the same records twice gives the same bytes. Every
text from a record (a model's name, a reason, a command) is escaped: a model named ``<script>`` stays text.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

#: The outcomes the filter offers (the nightly's, :data:`modelval.judgement.nightly.OUTCOMES`).
FILTERS = ("new failure", "fixed", "not in the status file", "not run", "flaky", "known failure", "skipped", "pass")
TREND_SIZE = (120, 36)
#: Flipped stimuli a failing case lists on the page (all of them are in report.json).
LISTED = 48

STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em;margin:0 0 .3em}h2{font-size:1.15em;margin:1.4em 0 .4em}
.pass{color:#1a7f37}.fail{color:#c62828}.muted{color:#666}
table{border-collapse:collapse;width:100%}th,td{border-bottom:1px solid #ddd;padding:4px 6px;text-align:left;
vertical-align:top;overflow-wrap:break-word}td:nth-child(1),td:nth-child(3){min-width:9em}
td:nth-child(5){min-width:10em}summary,td code{overflow-wrap:anywhere}
th{cursor:pointer;background:#f4f4f4;position:sticky;top:0}th[aria-sort]::after{content:" \\2195"}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}th{overflow-wrap:normal}
td.nowrap{white-space:nowrap;overflow-wrap:normal}
.badge{display:inline-block;padding:1px 6px;border-radius:8px;font-size:.85em;background:#eee}
.badge.new-failure,.badge.not-run,.badge.not-in-the-status-file{background:#fdd}.badge.fixed{background:#dfd}
.badge.flaky{background:#ffe8b3}.badge.known-failure{background:#f1e0ff}
.thumbs{display:flex;flex-wrap:wrap;gap:6px}.thumbs figure{margin:0;width:100px;font-size:.75em}
.thumbs img{width:96px;height:96px;display:block}details{margin:.2em 0}code{font-size:.85em;word-break:break-all}
"""

SCRIPT = """
(function(){
var table=document.getElementById('cases');var body=table.tBodies[0];
function key(cell){var v=cell.getAttribute('data-v');var n=parseFloat(v);return isNaN(n)?[1,v||'']:[0,n];}
Array.prototype.forEach.call(table.tHead.rows[0].cells,function(th,i){th.addEventListener('click',function(){
var up=th.getAttribute('aria-sort')!=='ascending';
Array.prototype.forEach.call(table.tHead.rows[0].cells,function(o){o.setAttribute('aria-sort','none');});
th.setAttribute('aria-sort',up?'ascending':'descending');
var rows=Array.prototype.slice.call(body.rows);rows.sort(function(a,b){var x=key(a.cells[i]),y=key(b.cells[i]);
var c=x[0]-y[0]||(x[1]<y[1]?-1:x[1]>y[1]?1:0);return up?c:-c;});
rows.forEach(function(r){body.appendChild(r);});});});
var select=document.getElementById('filter');select.addEventListener('change',function(){
Array.prototype.forEach.call(body.rows,function(r){
r.hidden=!(select.value==='all'||r.getAttribute('data-outcome')===select.value);});
var shown=Array.prototype.filter.call(body.rows,function(r){return !r.hidden;});
document.getElementById('shown').textContent=shown.length;
});})();
"""


def render_page(data: Mapping[str, Any]) -> str:
    """The page of a nightly report's data (``report.json``).

    Parameters
    ----------
    data
        What :func:`modelval.api.nightly_report` wrote to ``report.json``.
    """
    verdict = data.get("verdict", {})
    cases = list(data.get("cases", []))
    passed = verdict.get("passed") is True
    counts = ", ".join(f"{n} {escape(str(k))}" for k, n in verdict.get("counts", {}).items() if n)
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{escape(str(data.get('title', 'Nightly')))}</title><style>{STYLE}</style></head><body>",
        f"<h1>{escape(str(data.get('title', 'Nightly')))}</h1>",
        f'<p id="headline" class="{"pass" if passed else "fail"}"><strong>{"PASS" if passed else "FAIL"}</strong>'
        f" ({counts or 'nothing recorded'}); {escape(str(verdict.get('window', '')))}; status file "
        f"<code>{escape(str(verdict.get('status_file', '')))}</code></p>",
        _changes_line(cases),
        _coverage_line(data.get("coverage", {})),
        _filter(len(cases)),
        _table(cases),
        *[_failing_section(case) for case in cases if case.get("flipped")],
        _benchmark_section(data.get("benchmark")),
        f"<script>{SCRIPT}</script></body></html>",
    ]  # fmt: skip
    return "\n".join(parts) + "\n"


def _changes_line(cases: Sequence[Mapping[str, Any]]) -> str:
    """One line naming what changed: the new failures (regressed) and the fixes."""
    regressed = [c for c in cases if c.get("outcome") == "new failure"]
    fixed = [c for c in cases if c.get("outcome") == "fixed"]

    def names(found: Sequence[Mapping[str, Any]]) -> str:
        return ", ".join(f"{escape(str(c['model']))} <code>{escape(str(c['configuration']))}</code>" for c in found)

    regress = f"<strong>{len(regressed)} regressed</strong>: {names(regressed)}" if regressed else "0 regressed"
    fix = f"<strong>{len(fixed)} fixed</strong>: {names(fixed)}" if fixed else "0 fixed"
    return f'<p id="changes">{regress}; {fix}.</p>'


def _coverage_line(coverage: Mapping[str, Any]) -> str:
    classes = ", ".join(f"{n} {escape(str(k))}" for k, n in coverage.get("classes", {}).items())
    return (
        f'<p id="coverage">Coverage: <strong>{coverage.get("scored", 0)} of {coverage.get("cells", 0)}</strong> '
        f"cells scored; {coverage.get('failed', 0)} failed, {coverage.get('never run', 0)} never run"
        f"{' (' + classes + ')' if classes else ''}. A failed or never-run cell has no number and is not a zero.</p>"
    )


def _filter(total: int) -> str:
    options = "".join(f'<option value="{escape(o)}">{escape(o)}</option>' for o in FILTERS)
    return (
        f'<p><label>Show <select id="filter"><option value="all">all</option>{options}</select></label> '
        f'<span class="muted"><span id="shown">{total}</span> of {total} rows; click a column to sort.</span></p>'
    )


COLUMNS = ("Model", "Configuration", "Status", "Shape bias [95% CI]", "Expected ± tolerance", "Δ (pp)",
           "Flips vs baseline", "Cue-conflict accuracy", "Trend", "Coverage", "Provenance")  # fmt: skip


def _table(cases: Sequence[Mapping[str, Any]]) -> str:
    head = "".join(f'<th scope="col" aria-sort="none">{escape(c)}</th>' for c in COLUMNS)
    rows = "\n".join(_row(case) for case in cases)
    return f'<table id="cases"><thead><tr>{head}</tr></thead><tbody>\n{rows}\n</tbody></table>'


def _row(case: Mapping[str, Any]) -> str:
    summary = case.get("summary") or {}
    outcome = str(case.get("outcome", ""))
    cells = [
        _td(str(case.get("model")), _model_cell(case)),
        _td(str(case.get("configuration")), f"<code>{escape(str(case.get('configuration')))}</code>", "nowrap"),
        _td(outcome, _status_cell(case)),
        _number_td(summary.get("shape_bias"), _bias_text(summary)),
        _number_td(summary.get("expected"), _expected_text(summary)),
        _number_td(_pp(summary.get("difference")), _signed(summary.get("difference"))),
        _flips_td(summary.get("flips")),
        _number_td(summary.get("cue_accuracy"), _pct(summary.get("cue_accuracy"))),
        _td("", _trend_svg(case.get("trend", []))),
        _td(case["coverage"]["state"], _coverage_cell(case["coverage"])),
        _td((case.get("provenance") or {}).get("digest", ""), _provenance_cell(case.get("provenance"))),
    ]
    return f'<tr id="{escape(str(case["id"]))}" data-outcome="{escape(outcome)}">{"".join(cells)}</tr>'


def _td(sort_value: str, html: str, css: str = "") -> str:
    klass = f' class="{css}"' if css else ""
    return f'<td data-v="{escape(sort_value)}"{klass}>{html}</td>'


def _number_td(value: Any, html: str) -> str:
    number = _finite(value)
    return _td("" if number is None else f"{number:.6f}", html, "num")


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _pct(value: Any) -> str:
    number = _finite(value)
    return '<span class="muted" title="not measured">n/a</span>' if number is None else f"{number * 100:.2f}%"


def _pp(value: Any) -> float | None:
    number = _finite(value)
    return None if number is None else number * 100


def _signed(value: Any) -> str:
    number = _finite(value)
    if number is None:
        return '<span class="muted">n/a</span>'
    text = f"{number * 100:+.2f}"
    return "+0.00" if text == "-0.00" else text


def _bias_text(summary: Mapping[str, Any]) -> str:
    ci = summary.get("ci95") or [None, None]
    low, high = (_finite(v) for v in [*list(ci), None, None][:2])
    interval = f" [{low * 100:.1f}, {high * 100:.1f}]" if low is not None and high is not None else ""
    return _pct(summary.get("shape_bias")) + interval


def _expected_text(summary: Mapping[str, Any]) -> str:
    expected, tolerance = _finite(summary.get("expected")), _finite(summary.get("tolerance"))
    if expected is None:
        return '<span class="muted">none published</span>'
    source = summary.get("expected_source")
    tol = f" ± {tolerance * 100:.1f} pp" if tolerance is not None else ""
    cite = _long_text(str(source), 28) if source else ""
    return f"{expected * 100:.2f}%{tol}{cite}"


def _flips_td(flips: Any) -> str:
    if not isinstance(flips, Mapping):
        return _td("", '<span class="muted">no baseline</span>')
    count = flips.get("count", 0)
    allowed = flips.get("allowed")
    limit = f" (≤ {allowed})" if allowed is not None else ""
    return _td(f"{count:.0f}", f"{count}{limit}", "num")


def _model_cell(case: Mapping[str, Any]) -> str:
    summary = case.get("summary") or {}
    label = summary.get("label")
    extra = f'<br><span class="muted">{escape(str(label))}</span>' if label and label != case.get("model") else ""
    per_category = summary.get("per_category")
    if isinstance(per_category, Mapping) and per_category:
        extra += f"<details><summary>per category</summary>{_per_category_svg(per_category)}</details>"
    return f"<strong>{escape(str(case.get('model')))}</strong>{extra}"


def _per_category_svg(per_category: Mapping[str, Any]) -> str:
    """The shape bias of each category as a small bar chart (a grey tick: no shape or texture answer)."""
    names = sorted(per_category)
    width, height, bar = 16 * len(names), 60, 12
    shapes = [f'<line x1="0" y1="50" x2="{width}" y2="50" stroke="#999"/>']
    for i, name in enumerate(names):
        value = _finite((per_category[name] or {}).get("shape_bias"))
        x = i * 16 + 2
        if value is None:
            shapes.append(f'<rect x="{x}" y="48" width="{bar}" height="2" fill="#bbb"><title>{escape(name)}: '
                          "n/a</title></rect>")  # fmt: skip
        else:
            top = 50 - value * 46
            shapes.append(f'<rect x="{x}" y="{top:.1f}" width="{bar}" height="{50 - top:.1f}" fill="#4c72b0">'
                          f"<title>{escape(name)}: {value * 100:.1f}%</title></rect>")  # fmt: skip
        shapes.append(f'<text x="{x + bar / 2:.0f}" y="58" font-size="7" text-anchor="middle">'
                      f"{escape(name[:2])}</text>")  # fmt: skip
    return (f'<svg class="per-category" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
            f'aria-label="shape bias per category">{"".join(shapes)}</svg>')  # fmt: skip


def _status_cell(case: Mapping[str, Any]) -> str:
    outcome = str(case.get("outcome", ""))
    html = f'<span class="badge {escape(outcome.replace(" ", "-"))}">{escape(outcome)}</span>'
    reason = case.get("known_reason")
    if reason:
        html += f'<br><span class="muted">{escape(str(reason))}</span>'
    summary = case.get("summary") or {}
    if summary.get("reason"):
        html += _long_text(str(summary["reason"]))
    if case.get("flipped"):
        html += f'<br><a href="#{escape(str(case["id"]))}-flips">flipped stimuli</a>'
    return html


def _long_text(text: str, shown: int = 60) -> str:
    """A muted line; a long one folded into a ``<details>`` that opens on a click."""
    if len(text) <= shown:
        return f'<br><span class="muted">{escape(text)}</span>'
    return f'<details class="muted"><summary>{escape(text[:shown])}…</summary>{escape(text)}</details>'


def _coverage_cell(cell: Mapping[str, Any]) -> str:
    state, klass, why = (escape(str(cell.get(k, ""))) for k in ("state", "class", "why"))
    detail = f" ({klass})" if state != "scored" else ""
    return f"{state}{detail}" + (_long_text(str(cell.get("why", "")), 40) if why else "")


def _provenance_cell(provenance: Any) -> str:
    if not isinstance(provenance, Mapping):
        return '<span class="muted">none recorded</span>'
    versions = ", ".join(f"{escape(str(k))} {escape(str(v))}" for k, v in provenance.get("versions", {}).items() if v)
    return (
        f"<details><summary><code>{escape(str(provenance.get('digest', '')))}</code></summary>{versions}"
        f"<br>git <code>{escape(str(provenance.get('git') or 'n/a'))}</code>"
        f"<br>reproduce: <code>{escape(str(provenance.get('command') or 'n/a'))}</code></details>"
    )


def _trend_svg(points: Sequence[Mapping[str, Any]]) -> str:
    """Shape bias over the nights as a small inline SVG, with the expectation band of the newest record."""
    width, height = TREND_SIZE
    values = [(_finite(p.get("shape_bias")), bool(p.get("passed"))) for p in points]
    measured = [(i, v, ok) for i, (v, ok) in enumerate(values) if v is not None]
    if not measured:
        return '<span class="muted">no measured night</span>'
    last = points[-1]
    expected, tolerance = _finite(last.get("expected")), _finite(last.get("tolerance"))
    lows = [v for _, v, _ in measured] + ([expected - (tolerance or 0)] if expected is not None else [])
    highs = [v for _, v, _ in measured] + ([expected + (tolerance or 0)] if expected is not None else [])
    low, high = min(lows) - 0.02, max(highs) + 0.02
    step = (width - 8) / max(1, len(points) - 1)

    def y(value: float) -> float:
        return height - 4 - (value - low) / (high - low) * (height - 8)

    shapes = []
    if expected is not None:
        top, bottom = y(expected + (tolerance or 0)), y(expected - (tolerance or 0))
        shapes.append(f'<rect x="0" y="{top:.1f}" width="{width}" height="{max(bottom - top, 1):.1f}" '
                      'fill="#cfe8d5"><title>expected ± tolerance</title></rect>')  # fmt: skip
    line = " ".join(f"{4 + i * step:.1f},{y(v):.1f}" for i, v, _ in measured)
    shapes.append(f'<polyline points="{line}" fill="none" stroke="#555" stroke-width="1.2"/>')
    for i, v, ok in measured:
        colour = "#1a7f37" if ok else "#c62828"
        shapes.append(f'<circle cx="{4 + i * step:.1f}" cy="{y(v):.1f}" r="2.4" fill="{colour}">'
                      f"<title>run {points[i].get('run')}: {v * 100:.2f}%</title></circle>")  # fmt: skip
    label = f"shape bias over {len(measured)} nights"
    return (f'<svg class="trend" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
            f'aria-label="{label}">{"".join(shapes)}</svg>')  # fmt: skip


def _failing_section(case: Mapping[str, Any]) -> str:
    """The flipped stimuli of a failing case: thumbnails by transition, each linked to its decision row."""
    flipped = case["flipped"]
    anchor = escape(str(case["id"]))
    title = f"{escape(str(case['model']))} <code>{escape(str(case['configuration']))}</code>"
    if not flipped.get("groups"):
        why = escape(str(flipped.get("why") or "no decision changed"))
        return f'<section id="{anchor}-flips"><h2>{title}</h2><p class="muted">{why}</p></section>'
    since = f"{escape(str(flipped['since']))} (run {flipped['since_run']})"
    parts = [f'<section id="{anchor}-flips"><h2>{title}: {flipped["count"]} decisions changed since its {since}</h2>']
    rows: list[str] = []
    for transition, items in flipped["groups"].items():
        figures = []
        for item in items[: max(0, LISTED - len(rows))]:
            row_id = f"{anchor}-{hashlib.sha256(str(item['image']).encode()).hexdigest()[:12]}"
            name = escape(str(item["image"]))
            if item.get("thumbnail"):
                figures.append(f'<figure><a href="#{row_id}"><img src="{escape(str(item["thumbnail"]))}" alt="{name}" '
                               f'width="96" height="96"></a><figcaption>{name}</figcaption></figure>')  # fmt: skip
            before, after = escape(str(item["before"])), escape(str(item["after"]))
            rows.append(f'<tr id="{row_id}"><td><code>{name}</code></td><td>{escape(transition)}</td>'
                        f"<td>{before}</td><td>{after}</td></tr>")  # fmt: skip
        parts.append(f'<h3>{escape(transition)} ({len(items)})</h3><div class="thumbs">{"".join(figures)}</div>')
    more = flipped["count"] - len(rows)
    if more > 0:
        rows.append(f'<tr><td colspan="4" class="muted">and {more} more: every one is in report.json</td></tr>')
    parts.append(
        "<details open><summary>per-image decisions</summary><table><thead><tr><th>image</th><th>transition"
        f"</th><th>before</th><th>after</th></tr></thead><tbody>{''.join(rows)}</tbody></table></details>"
    )
    return "\n".join(parts) + "</section>"


def _benchmark_section(benchmark: Any) -> str:
    """The benchmark table (``benchmark.json``): each observer's mean rank with its interval and each measure."""
    if not isinstance(benchmark, Mapping):
        return ""
    if benchmark.get("error"):
        return (
            f'<section id="benchmark"><h2>Benchmark</h2><p class="fail">{escape(str(benchmark["error"]))}</p></section>'
        )
    metrics = [str(m) for m in benchmark.get("metrics", [])]
    head = "".join(f"<th>{escape(h)}</th>" for h in ["Observer", "Mean rank [95%]", *metrics])
    rows = []
    for row in benchmark.get("rows", []):
        rank = _finite(row["ranks"].get("mean_rank"))
        low, high = (_finite(v) for v in [*(row["rank_intervals"].get("mean_rank") or []), None, None][:2])
        shown = (
            "unranked"
            if rank is None
            else f"{rank:.2f}" + (f" [{low:g}, {high:g}]" if low is not None and high is not None else "")
        )
        cells = [f"<td>{escape(str(row['observer']))}</td>", f'<td class="num">{escape(shown)}</td>']
        for metric in metrics:
            value = _finite(row["aggregate"].get(metric))
            ci = [_finite(v) for v in [*(row["intervals"].get(metric) or []), None, None][:2]]
            text = (
                "n/a" if value is None else f"{value:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if None not in ci else "")
            )
            cells.append(f'<td class="num">{text}</td>')
        rows.append(f"<tr>{''.join(cells)}</tr>")
    return (
        f'<section id="benchmark"><h2>Benchmark ({escape(str(benchmark.get("file")))})</h2><table>'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></section>"
    )
