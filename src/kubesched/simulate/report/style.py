"""The inline stylesheet and script every HTML report page shares (sortable, filterable tables;
no external URL), and the page around them."""

from __future__ import annotations

from collections.abc import Iterable
from html import escape

_CSS = """
:root{--fg:#1e293b;--muted:#64748b;--bg:#f1f5f9;--panel:#fff;--line:#e2e8f0;--accent:#4f46e5;
--ok:#16a34a;--bad:#e11d48;--warn:#d97706}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:14px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,
"Helvetica Neue",Arial,"Noto Sans",sans-serif;-webkit-font-smoothing:antialiased}
main{max-width:1320px;margin:0 auto;padding:24px 28px 48px}
header{display:flex;flex-wrap:wrap;align-items:flex-end;justify-content:space-between;gap:12px;margin-bottom:18px}
h1{font-size:24px;margin:0;letter-spacing:-.01em}
h2{font-size:17px;margin:0 0 12px;letter-spacing:-.01em}
.meta{color:var(--muted);font-size:13px}.meta code{color:var(--fg)}
code{font:12.5px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:#eef2ff;padding:1px 5px;
border-radius:4px}
section{background:var(--panel);border:1px solid var(--line);border-radius:12px;padding:18px 20px;margin:0 0 18px;
box-shadow:0 1px 2px rgba(15,23,42,.04)}
#summary{background:none;border:0;box-shadow:none;padding:0}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(132px,1fr));gap:12px}
.card{background:var(--panel);border:1px solid var(--line);border-radius:10px;padding:12px 14px;
border-top:3px solid var(--line)}
.card.ok{border-top-color:var(--ok)}.card.bad{border-top-color:var(--bad)}.card.warn{border-top-color:var(--warn)}
.card .lbl{font-size:12px;text-transform:uppercase;letter-spacing:.05em;color:var(--muted);font-weight:600}
.card .val{font-size:24px;white-space:nowrap;font-weight:650;font-variant-numeric:tabular-nums;line-height:1.25}
.card .sub{font-size:12px;color:var(--muted)}
.statusbar{margin-top:12px;background:var(--panel);border:1px solid var(--line);border-radius:10px;padding:10px 14px}
svg.status{width:100%;height:14px;display:block;border-radius:7px;overflow:hidden}
.slegend{display:flex;flex-wrap:wrap;gap:16px;margin-top:8px;font-size:12.5px;color:var(--muted)}
.slegend i,.kb,.ka{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:6px;
vertical-align:-1px}
.kb{background:#94a3b8}.ka{background:#4f46e5}
.verdict{margin:0 0 14px;padding:10px 14px;border-radius:10px;font-weight:600}
.verdict.ok{background:#dcfce7;color:#166534}.verdict.bad{background:#ffe4e6;color:#9f1239}
h3{font-size:15px;margin:0 0 10px}#capacity-templates{margin-bottom:18px}
.capacity-fit+.capacity-fit,.capacity-scale{border-top:1px solid var(--line);margin-top:18px;padding-top:14px}
.capacity-scale:first-of-type{border-top:0;margin-top:0;padding-top:0}
.notes{margin:0;padding-left:18px}.notes li{margin:3px 0}.notes li.warn{color:#92400e}
.grid{display:grid;gap:18px;align-items:start}
.grid.two{grid-template-columns:repeat(auto-fit,minmax(460px,1fr))}
.grid.nodes{grid-template-columns:minmax(0,4fr) minmax(0,7fr)}
@media (max-width:1100px){.grid.nodes{grid-template-columns:1fr}}
.grid.three{grid-template-columns:repeat(auto-fit,minmax(320px,1fr));margin-top:14px}
figure{margin:0}figure.wide{max-width:900px}
svg.chart{width:100%;height:auto;display:block;overflow:visible}
svg.chart text{font-family:inherit;font-size:12px;fill:#334155}
svg.chart .t{font-size:14.5px;font-weight:650;fill:#0f172a}
svg.chart .tk{fill:#64748b;font-size:11px;font-variant-numeric:tabular-nums}
svg.chart .al{fill:#475569;font-size:12px;font-weight:600}
svg.chart .lg{fill:#334155}
svg.chart .vl{font-size:11px;fill:#334155;font-variant-numeric:tabular-nums}
svg.chart .rl{font-size:12px;fill:#1e293b}
svg.chart .empty{fill:#64748b;font-size:14px}
svg.chart .g{stroke:#e2e8f0;stroke-width:1}
svg.chart .ax{stroke:#94a3b8;stroke-width:1}
svg.chart rect:hover{opacity:.8}
.side p{margin:4px 0 12px}
table{border-collapse:collapse;width:100%;font-size:13px}
caption{text-align:left;color:var(--muted);font-size:12.5px;padding-bottom:6px}
th,td{padding:6px 8px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
th{font-size:12px;text-transform:uppercase;letter-spacing:.04em;color:var(--muted);font-weight:600;
background:#f8fafc;position:sticky;top:0}
table.sortable th{cursor:pointer;user-select:none}table.sortable th:hover{color:var(--fg)}
th.n,td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.up{color:var(--accent);font-weight:600}
td.name{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px;word-break:break-all}
td.node{max-width:190px;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
td.msg{color:#334155;max-width:640px}
tbody tr:hover{background:#f8fafc}
.compact{max-width:420px}
.meter{display:inline-block;position:relative;width:44px;height:8px;border-radius:4px;background:#eef2f7;
margin-right:8px;vertical-align:0;overflow:hidden}
.meter span{position:absolute;left:0;top:0;bottom:0}
.meter .a{background:#4f46e5;opacity:.85}.meter .b{background:#94a3b8;z-index:1;height:3px;top:auto}
.meter.hot .a{background:#e11d48}
.chip{display:inline-block;font-size:11.5px;padding:0 7px;border-radius:10px;background:#f1f5f9;
border:1px solid var(--line);margin:0 4px 2px 0;white-space:nowrap}
.chip.warn{background:#fef3c7;border-color:#fde68a;color:#92400e}
.st{font-size:12px;font-weight:600;padding:1px 8px;border-radius:10px;white-space:nowrap}
.st-Scheduled{background:#dcfce7;color:#166534}.st-Unschedulable{background:#ffe4e6;color:#9f1239}.st-Error{background:#fecdd3;color:#881337}
.scroll{overflow:auto;max-height:560px}.scroll.tall{max-height:640px}
.filter{display:flex;gap:12px;align-items:center;margin:16px 0 8px}
.filter input{font:inherit;padding:6px 10px;border:1px solid #cbd5e1;border-radius:8px;width:min(420px,100%)}
td.nw{white-space:nowrap}.muted{color:var(--muted)}.ok{color:var(--ok)}.more{color:var(--muted);font-size:13px}
footer{color:var(--muted);font-size:12px;text-align:center}
@media (max-width:700px){main{padding:14px}.grid.two,.grid.three{grid-template-columns:1fr}
section{padding:14px}}
@media print{body{background:#fff}section{box-shadow:none;break-inside:avoid}.filter{display:none}}
"""

_JS = """
(function(){
document.querySelectorAll('input[data-filter]').forEach(function(inp){
  var rows=document.getElementById(inp.dataset.filter).tBodies[0].rows;
  inp.addEventListener('input',function(){var q=inp.value.toLowerCase();
    for(var i=0;i<rows.length;i++){rows[i].style.display=rows[i].textContent.toLowerCase().indexOf(q)<0?'none':'';}});
});
document.querySelectorAll('table.sortable').forEach(function(t){
  t.tHead.rows[0].querySelectorAll('th').forEach(function(th,col){
    var asc=false;th.addEventListener('click',function(){asc=!asc;
      var b=t.tBodies[0],rs=Array.prototype.slice.call(b.rows);
      rs.sort(function(x,y){var a=x.cells[col],c=y.cells[col];
        var va=a.dataset.v!==undefined?parseFloat(a.dataset.v):a.textContent;
        var vc=c.dataset.v!==undefined?parseFloat(c.dataset.v):c.textContent;
        var r=typeof va==='number'?va-vc:String(va).localeCompare(String(vc));return asc?r:-r;});
      rs.forEach(function(r){b.appendChild(r);});});});
});
})();
"""


def html_page(title: str, sections: Iterable[str]) -> str:
    """A whole self-contained report page: ``title`` (escaped here) and the rendered ``sections``."""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{escape(title, quote=True)}</title><style>{_CSS}</style></head><body><main>"
        + "".join(sections)
        + f"</main><script>{_JS}</script></body></html>\n"
    )
