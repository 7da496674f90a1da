package operate

// templates are the operator pages: self-contained (inline CSS, no scripts, no external
// assets), rendered by html/template, which escapes every value.
const templates = `
{{define "css"}}<style>
:root{--ink:#1d232b;--muted:#5f6b78;--line:#dfe3e8;--bg:#f3f5f7;--card:#fff;--head:#f8f9fb;--accent:#154273;
--bad:#b3261e;--badbg:#fdeceb;--badline:#f0c2be;--warn:#7a4f00;--warnbg:#fff3d1;--ok:#1b6b38;--okbg:#e4f3e8}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans","Liberation Sans","DejaVu Sans",sans-serif;color:var(--ink);background:var(--bg)}
header{background:var(--accent);color:#fff;padding:12px 28px;display:flex;align-items:baseline;gap:8px 18px;flex-wrap:wrap}
header h1{font-size:18px;margin:0;font-weight:600;letter-spacing:.01em}
header h1 small{font-weight:400;opacity:.8;margin-left:6px}
header .meta{margin-left:auto;font-size:12.5px;opacity:.9}
header a{color:#fff}
main{max-width:1280px;margin:0 auto;padding:18px 28px 36px}
.cards{display:grid;grid-template-columns:repeat(4,minmax(0,1fr));gap:14px}
.card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:12px 16px 14px}
.label{font-size:11.5px;text-transform:uppercase;letter-spacing:.06em;color:var(--muted);font-weight:600}
.value{font-size:30px;font-weight:650;line-height:1.15;margin-top:4px;font-variant-numeric:tabular-nums}
.sub{font-size:12.5px;color:var(--muted);margin-top:2px}
.card.bad{border-color:var(--badline);background:var(--badbg)}
.card.bad .value{color:var(--bad)}
.spark{display:flex;align-items:flex-end;gap:3px;height:26px;margin-top:6px}
.spark span{flex:1;background:#b7c6d6;border-radius:2px 2px 0 0;min-height:2px}
.spark span:last-child{background:var(--accent)}
.grid2{display:grid;grid-template-columns:repeat(2,minmax(0,1fr));gap:14px}
section{background:var(--card);border:1px solid var(--line);border-radius:8px;margin-top:14px;overflow:hidden}
h2{font-size:13.5px;margin:0;padding:9px 16px;border-bottom:1px solid var(--line);background:var(--head);font-weight:650}
h2 .count{color:var(--muted);font-weight:400;margin-left:6px}
.body{padding:12px 16px}
dl{display:grid;grid-template-columns:max-content 1fr;gap:5px 18px;margin:0}
dt{color:var(--muted)}
dd{margin:0;overflow-wrap:anywhere}
table{width:100%;border-collapse:collapse;font-variant-numeric:tabular-nums}
th,td{text-align:left;padding:6px 14px;border-bottom:1px solid var(--line);vertical-align:top}
th{font-size:11.5px;text-transform:uppercase;letter-spacing:.06em;color:var(--muted);font-weight:600;background:var(--head);white-space:nowrap}
tbody tr:last-child td{border-bottom:0}
tbody tr:hover td{background:#f7f9fb}
.num{text-align:right}
.nowrap{white-space:nowrap}
code{font:12px/1.5 ui-monospace,"DejaVu Sans Mono","Liberation Mono",Menlo,Consolas,monospace;background:#eef1f5;border:1px solid #e2e6eb;padding:0 5px;border-radius:4px;white-space:nowrap}
.cmd{display:table;margin:1px 0 3px;user-select:all}
.badge{display:inline-block;padding:0 8px;border-radius:10px;font-size:12px;font-weight:600;line-height:20px;white-space:nowrap}
.ok{background:var(--okbg);color:var(--ok)}
.bad{background:var(--badbg);color:var(--bad)}
.warn{background:var(--warnbg);color:var(--warn)}
.idle{background:#eceff3;color:var(--muted)}
.reason{color:var(--bad);overflow-wrap:anywhere;min-width:200px}
.small{font-size:12px}
.ids{max-width:150px}
.cmds{width:1%}
.muted{color:var(--muted)}
.empty{color:var(--muted);padding:12px 16px}
.note{padding:10px 16px;border-bottom:1px solid var(--line)}
a{color:var(--accent);text-decoration-thickness:1px;text-underline-offset:2px}
footer{color:var(--muted);font-size:12px;margin-top:16px}
@media (max-width:900px){.cards{grid-template-columns:repeat(2,minmax(0,1fr))}.grid2{grid-template-columns:1fr}}
</style>{{end}}

{{define "status"}}<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="refresh" content="5">
<title>{{if .O.Fout}}({{.O.Fout}} fout) {{end}}BRP levering · publicatie status</title>
{{template "css"}}</head><body>
<header><h1>BRP levering<small>publicatie status</small></h1>
<div class="meta">cluster <b>{{.O.Cluster}}</b> · fout policy <b>{{.O.FoutPolicy}}</b> · excluded {{range $i, $s := .O.Excluded}}{{if $i}}, {{end}}{{$s}}{{else}}none{{end}} · {{tss .O.GeneratedAt}} · refreshes every 5 s</div></header>
<main>
<div class="cards">
 <div class="card"><div class="label">Backlog</div><div class="value">{{num .O.Backlog}}</div><div class="sub">te leveren, waiting to be published</div></div>
 <div class="card"><div class="label">In levering</div><div class="value">{{num .O.InLevering}}</div><div class="sub">published, not yet confirmed</div></div>
 <div class="card"><div class="label">Delivered last minute</div><div class="value">{{num .O.DeliveredLastMinute}}</div>
  <div class="spark" title="deliveries per minute, last 10 minutes">{{range .O.DeliveredPerMinute}}<span style="height:{{pct . $.Max}}%" title="{{.}}"></span>{{end}}</div>
  <div class="sub">last 10 minutes · {{num .O.Geleverd}} geleverd in total</div></div>
 <div class="card{{if .O.Fout}} bad{{end}}"><div class="label">Fout</div><div class="value">{{num .O.Fout}}</div><div class="sub">{{if .O.Fout}}need an operator: retry or release{{else}}no handelingen in fout{{end}}</div></div>
</div>

<div class="grid2">
<section><h2>Oldest undelivered handeling</h2><div class="body">
{{with .O.Oldest}}<dl>
 <dt>Handeling</dt><dd><a href="/fout/{{.ID}}">{{.ID}}</a> · {{.Soort}}</dd>
 <dt>Registered</dt><dd>{{ts .Tsreg}}</dd>
 <dt>Age</dt><dd><b>{{age .AgeSeconds}}</b></dd>
 <dt>Status</dt><dd>{{if eq .Statuslev statusInLevering}}<span class="badge warn">in levering</span>{{else}}<span class="badge idle">te leveren</span>{{end}}</dd>
</dl>{{else}}<span class="muted">Nothing to deliver: everything not excluded is geleverd or fout.</span>{{end}}
</div></section>

<section><h2>Publisher lease</h2><div class="body"><dl>
 <dt>Leader</dt><dd>{{if .O.Lease.Holder}}<code>{{.O.Lease.Holder}}</code>{{else}}<span class="badge bad">nobody holds the lease</span>{{end}}</dd>
 <dt>Epoch</dt><dd>{{.O.Lease.Epoch}}</dd>
 <dt>Last activity</dt><dd>{{if lt .O.Lease.SecondsSinceActivity 0.0}}never{{else}}{{age .O.Lease.SecondsSinceActivity}} ago{{if gt .O.Lease.SecondsSinceActivity 10.0}} <span class="badge warn">silent</span>{{end}}{{end}}</dd>
 <dt>This instance</dt><dd>{{if .Known}}<code>{{.Instance}}</code> {{if .Leading}}<span class="badge ok">leads</span>{{else}}<span class="badge idle">standby</span>{{end}}{{else}}<span class="muted">unknown</span>{{end}}</dd>
</dl></div></section>
</div>


<section><h2>Fout handelingen<span class="count">{{num .O.Fout}}{{if gt .O.Fout (int64 (len .O.Fouten))}} · showing the newest {{len .O.Fouten}}{{end}}</span></h2>
{{if .O.Fouten}}<table><thead><tr><th>Handeling</th><th>Registered</th><th>Personen</th><th>Reason</th><th>Released</th><th>Operator commands</th></tr></thead><tbody>
{{range .O.Fouten}}<tr><td><a href="/fout/{{.ID}}">{{.ID}}</a><div class="small muted">{{.Soort}}</div></td><td class="nowrap">{{tss .Tsreg}}</td><td class="ids">{{with .Personen}}{{join .}}{{else}}<span class="muted">none</span>{{end}}</td>
<td class="reason">{{.Foutreden}}</td>
<td>{{if .Vrijgegeven}}<span class="badge ok">released</span>{{else}}<span class="badge bad">not released</span>{{end}}</td>
<td class="cmds"><code class="cmd">publicatie fout retry {{.ID}} --door NAME</code>{{if not .Vrijgegeven}}<code class="cmd">publicatie fout release {{.ID}} --door NAME</code>{{end}}</td></tr>
{{end}}</tbody></table>{{else}}<div class="empty">No handelingen in fout.</div>{{end}}
</section>

<section><h2>Blocked persons<span class="count">{{num .O.BlockedTotal}}{{if gt .O.BlockedTotal (int64 (len .O.Blocked))}} · showing {{len .O.Blocked}}{{end}}</span></h2>
{{if .O.Blocked}}<table><thead><tr><th>Persoon</th><th>Held by handeling</th><th>Why</th><th class="num">Waiting</th></tr></thead><tbody>
{{range .O.Blocked}}<tr><td>{{.PersoonID}}</td><td><a href="/fout/{{.BlockingID}}">{{.BlockingID}}</a></td>
<td>{{if eq .BlockingStatus statusFout}}<span class="reason">{{.Why}}</span>{{else}}{{.Why}}{{end}}</td><td class="num">{{num .Waiting}}</td></tr>
{{end}}</tbody></table>{{else}}<div class="empty">No person is held up: every waiting handeling can be published.</div>{{end}}
</section>
<footer>Retry puts a handeling back to be delivered in its place; release lets the persons' later handelingen pass it (strict policy). Both are recorded with who did it. · <a href="/overview.json">overview.json</a></footer>
</main></body></html>
{{end}}

{{define "fout"}}<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Handeling {{.D.ID}} · BRP levering</title>
{{template "css"}}</head><body>
<header><h1>Handeling {{.D.ID}}<small>{{.D.Soort}}</small></h1><div class="meta"><a href="/">← status</a></div></header>
<main>
<section><h2>Handeling</h2><div class="body"><dl>
 <dt>Status</dt><dd>{{template "statuslev" .D.Statuslev}}</dd>
 <dt>Soort</dt><dd>{{.D.Soort}}</dd>
 <dt>Registered</dt><dd>{{ts .D.Tsreg}}</dd>
 <dt>Personen</dt><dd>{{with .D.Personen}}{{join .}}{{else}}<span class="muted">none</span>{{end}}</dd>
 {{if .D.Foutreden}}<dt>Reason</dt><dd class="reason">{{.D.Foutreden}}</dd>{{end}}
 {{if eq .D.Statuslev statusFout}}<dt>Released</dt><dd>{{with .D.Vrijgegeven}}<span class="badge ok">released</span> {{tsp .}}{{else}}<span class="badge bad">no</span>{{end}}</dd>{{end}}
</dl></div></section>

{{if eq .D.Statuslev statusFout}}<section><h2>Operator commands</h2>
{{if .D.Overtaken}}<div class="note"><span class="badge warn">note</span> {{.D.Overtaken}} later handeling(en) of its persons are already in levering or geleverd: a retry delivers this one after them.</div>{{end}}
<div class="body"><code class="cmd">publicatie fout retry {{.D.ID}} --door NAME --note "..."</code>
{{if not .D.Vrijgegeven}}<code class="cmd">publicatie fout release {{.D.ID}} --door NAME --note "..."</code>{{end}}</div></section>{{end}}

<section><h2>Held back by this handeling<span class="count">{{num .D.HeldBackTotal}}{{if gt .D.HeldBackTotal (int64 (len .D.HeldBack))}} · showing {{len .D.HeldBack}}{{end}}</span></h2>
{{if .D.HeldBack}}<table><thead><tr><th>Handeling</th><th>Soort</th><th>Registered</th></tr></thead><tbody>
{{range .D.HeldBack}}<tr><td>{{.ID}}</td><td>{{.Soort}}</td><td>{{ts .Tsreg}}</td></tr>
{{end}}</tbody></table>{{else}}<div class="empty">It holds nothing back{{if eq .D.Statuslev statusFout}}{{if .D.Vrijgegeven}} (released){{end}}{{end}}.</div>{{end}}
</section>

<section><h2>Operator history<span class="count">{{len .D.Audit}}</span></h2>
{{if .D.Audit}}<table><thead><tr><th>When</th><th>Action</th><th>By</th><th>Note</th></tr></thead><tbody>
{{range .D.Audit}}<tr><td class="nowrap">{{ts .Op}} <span class="muted">({{since $.Now .Op}} ago)</span></td><td>{{.Actie}}</td><td>{{.Door}}</td><td>{{.Toelichting}}</td></tr>
{{end}}</tbody></table>{{else}}<div class="empty">No operator action yet.</div>{{end}}
</section>
</main></body></html>
{{end}}

{{define "statuslev"}}{{if eq . statusFout}}<span class="badge bad">fout</span>{{else if eq . statusGeleverd}}<span class="badge ok">geleverd</span>{{else if eq . statusInLevering}}<span class="badge warn">in levering</span>{{else}}<span class="badge idle">te leveren</span>{{end}}{{end}}

{{define "error"}}<!doctype html>
<html lang="en"><head><meta charset="utf-8">{{if .Refresh}}<meta http-equiv="refresh" content="5">{{end}}
<title>{{.Title}} · BRP levering</title>{{template "css"}}</head><body>
<header><h1>BRP levering<small>{{.Title}}</small></h1><div class="meta"><a href="/">← status</a></div></header>
<main><section><h2>{{.Title}}</h2><div class="body">{{.Message}}</div></section></main></body></html>
{{end}}
`
