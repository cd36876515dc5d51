package report

import (
	"fmt"
	"html/template"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/fenced-dev/fenced/check/checker"
	"github.com/fenced-dev/fenced/check/history"
)

// page is what pageTemplate shows.
type page struct {
	S          Summary
	Line       string
	Pass       bool
	Duration   string
	Started    string
	Ended      string
	Faults     string
	Checks     string
	Violations []violationItem
	Locks      []swatch
	FaultKinds []swatch
	Defs       template.HTML
	Labels     template.HTML
	Timeline   template.HTML
	Overview   template.HTML
	Empty      bool
	Width      int
	NViolate   int
}

type violationItem struct {
	N       int
	Check   string
	Message string
	Where   string
	X       int
	HasX    bool
}

type swatch struct {
	Name, Color, Text, Label string
	Marker                   bool
}

// svgDefs are the patterns the timeline and the legend share.
const svgDefs = `<svg width="0" height="0" style="position:absolute" aria-hidden="true" xmlns="http://www.w3.org/2000/svg"><defs>` +
	`<pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">` +
	`<rect width="6" height="6" fill="#eeeeee"/><line x1="0" y1="0" x2="0" y2="6" stroke="#8a8a8a" stroke-width="2"/></pattern>` +
	`<pattern id="gone" width="7" height="7" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">` +
	`<line x1="0" y1="0" x2="0" y2="7" stroke="#ffffff" stroke-opacity="0.7" stroke-width="3.5"/></pattern>` +
	`</defs></svg>`

func writeHTML(w io.Writer, h history.History, violations []checker.Violation, s Summary) error {
	t := newTimeline(h, violations)
	p := page{
		S:        s,
		Line:     s.Line(),
		Pass:     len(violations) == 0 && s.Violations == 0,
		NViolate: max(len(violations), s.Violations),
		Duration: s.Duration.String(),
		Started:  clockText(s.Started),
		Ended:    clockText(s.Ended),
		Faults:   strings.Join(s.Faults, ", "),
		Checks:   strings.Join(s.ChecksRun, ", "),
		Defs:     template.HTML(svgDefs),
		Labels:   template.HTML(t.labels()),
		Timeline: template.HTML(t.render()),
		Empty:    len(h) == 0,
		Width:    int(t.width),
	}
	if s.Duration == 0 && !s.Started.IsZero() && s.Ended.After(s.Started) {
		p.Duration = s.Ended.Sub(s.Started).Round(time.Millisecond).String()
	}
	if t.width > tlScreenW+tlPad+tlPadR+40 {
		p.Overview = template.HTML(t.overview())
	}
	for i, v := range violations {
		rv := violationItem{N: i + 1, Check: v.Check, Message: v.Message}
		var procs []string
		seen := map[string]bool{}
		var first int64
		for j, op := range v.Ops {
			if !seen[op.Process] {
				seen[op.Process] = true
				procs = append(procs, op.Process)
			}
			if j == 0 || op.Invoke < first {
				first = op.Invoke
			}
		}
		sort.Slice(procs, func(a, b int) bool { return laneLess(procs[a], procs[b]) })
		if x := t.violationX[i]; x >= 0 {
			rv.X, rv.HasX = int(x), true
			rv.Where = fmt.Sprintf("at %s on %s, %d op(s)", t.rel(first), strings.Join(procs, ", "), len(v.Ops))
		}
		p.Violations = append(p.Violations, rv)
	}
	for _, n := range t.lockNames {
		p.Locks = append(p.Locks, swatch{Name: n, Color: t.lockColor[n]})
	}
	kinds := map[string]bool{}
	for _, k := range append(append([]string(nil), s.Faults...), t.faultKinds...) {
		if k == "" || kinds[k] {
			continue
		}
		kinds[k] = true
		st := styleOf(k)
		p.FaultKinds = append(p.FaultKinds, swatch{Name: k, Color: st.color, Text: st.text, Label: st.label, Marker: st.marker})
	}
	return pageTemplate.Execute(w, p)
}

func clockText(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000 UTC")
}

var pageTemplate = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>fenced check: {{if .Pass}}PASS{{else}}FAIL{{end}} (seed {{.S.Seed}})</title>
<style>
:root { color-scheme: light; }
body { margin: 0; padding: 16px 20px 40px; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: #222; background: #fff; }
h1 { font-size: 22px; margin: 0 0 6px; display: flex; align-items: center; gap: 12px; }
h2 { font-size: 16px; margin: 14px 0 4px; }
.verdict { font-size: 14px; padding: 2px 10px; border-radius: 12px; color: #fff; letter-spacing: .04em; }
.pass { background: #2e9e44; } .fail { background: #d00000; }
.line { font: 14px/1.3 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; background: #f3f3f3; border: 1px solid #ddd; border-radius: 4px; padding: 6px 10px; display: inline-block; margin: 4px 0 8px; user-select: all; }
.head { display: flex; flex-wrap: wrap; gap: 8px 36px; align-items: flex-start; }
.stats { display: flex; flex-wrap: wrap; gap: 10px; margin: 0 0 8px; }
.stats div { border: 1px solid #ddd; border-radius: 6px; padding: 4px 14px 6px; min-width: 110px; color: #555; font-size: 12px; background: #fafafa; }
.stats b { display: block; font-size: 22px; color: #222; }
.stats .bad { border-color: #d00000; background: #fff5f5; } .stats .bad b { color: #d00000; }
dl.summary { display: flex; flex-wrap: wrap; gap: 2px 22px; margin: 0; font-size: 13px; }
dl.summary div { display: flex; gap: 6px; } dl.summary dt { color: #777; } dl.summary dd { margin: 0; font-weight: 600; }
.unfenced { color: #b00000; }
#violations { border: 2px solid #d00000; border-radius: 6px; padding: 6px 14px 8px; background: #fff5f5; margin-top: 14px; }
#violations h2 { color: #b00000; margin-top: 4px; }
#violations ol { margin: 0; padding-left: 0; list-style: none; }
#violations li { margin: 4px 0; }
#violations .tag { display: inline-block; min-width: 26px; text-align: center; background: #d00000; color: #fff; font-weight: 700; border-radius: 3px; padding: 0 4px; margin-right: 6px; text-decoration: none; }
#violations .check { font-weight: 700; margin-right: 6px; } #violations .where { color: #777; margin-left: 6px; }
.legend { display: flex; flex-wrap: wrap; gap: 4px 18px; align-items: center; margin: 4px 0; font-size: 13px; }
.legend span { display: inline-flex; align-items: center; gap: 6px; white-space: nowrap; }
.legend svg { flex: none; }
.legend b { color: #555; font-weight: 600; margin-right: -6px; }
.howto { color: #555; font-size: 13px; margin: 2px 0 6px; max-width: 1250px; }
.timeline { display: flex; border: 1px solid #ccc; border-radius: 4px; background: #fff; }
.labels { flex: none; border-right: 1px solid #ccc; }
.scroll { overflow-x: auto; overflow-y: hidden; flex: 1; }
#timeline { display: block; }
#timeline .halo, .legend .halo { paint-order: stroke; stroke: #fff; stroke-width: 3px; stroke-linejoin: round; }
#timeline g:hover > rect, #timeline rect:hover, #timeline circle:hover { stroke: #000; stroke-width: 1.2; }
#overview { display: block; cursor: pointer; border: 1px solid #ccc; border-radius: 4px; margin: 6px 0; }
.flash { animation: flash 1.2s ease-out 2; }
@keyframes flash { 50% { opacity: .2; } }
footer { color: #888; font-size: 12px; margin-top: 10px; }
</style>
</head>
<body>
{{.Defs}}
<header>
<div class="head">
<div>
<h1>fenced check <span class="verdict {{if .Pass}}pass{{else}}fail{{end}}">{{if .Pass}}PASS{{else}}FAIL: {{.NViolate}} violation{{if ne .NViolate 1}}s{{end}}{{end}}</span></h1>
<div class="line" title="the one-line summary printed last on stdout">{{.Line}}</div>
</div>
<div class="stats">
<div><b>{{.S.Ops}}</b>client ops</div>
<div><b>{{.S.Grants}}</b>grants</div>
<div><b>{{.S.StaleRejected}}</b>stale writes rejected</div>
<div><b>{{.S.FaultsInjected}}</b>faults injected</div>
<div{{if .S.Violations}} class="bad"{{end}}><b>{{.S.Violations}}</b>violations</div>
</div>
</div>
<dl class="summary">
<div><dt>seed</dt><dd>{{.S.Seed}}</dd></div>
<div><dt>nodes</dt><dd>{{.S.Nodes}}</dd></div>
<div><dt>duration</dt><dd>{{.Duration}}</dd></div>
<div><dt>resource</dt><dd{{if eq .S.Resource "unfenced"}} class="unfenced" title="control run: the resource does not check tokens"{{end}}>{{if .S.Resource}}{{.S.Resource}}{{else}}—{{end}}</dd></div>
<div><dt>faults</dt><dd>{{if .Faults}}{{.Faults}}{{else}}none{{end}}</dd></div>
<div><dt>checks</dt><dd>{{if .Checks}}{{.Checks}}{{else}}—{{end}}</dd></div>
<div><dt>started</dt><dd>{{.Started}}</dd></div>
<div><dt>ended</dt><dd>{{.Ended}}</dd></div>
</dl>
</header>
{{if .Violations}}
<section id="violations">
<h2>Violations ({{len .Violations}})</h2>
<ol>
{{range .Violations}}<li>{{if .HasX}}<a class="tag" href="#v{{.N}}" data-x="{{.X}}">V{{.N}}</a>{{else}}<span class="tag">V{{.N}}</span>{{end}}<span class="check">{{.Check}}</span>{{.Message}}{{if .Where}}<span class="where">{{.Where}}{{if .HasX}} · <a href="#v{{.N}}" data-x="{{.X}}">show on the timeline</a>{{end}}</span>{{end}}</li>
{{end}}</ol>
</section>
{{end}}
<h2>Timeline</h2>
<p class="howto">Time runs left to right from the first recorded event, one row per client process, server node and the nemesis that injects faults.
A bar is a lock grant as its holder saw it, labelled with the lock and its fencing token (#3); striped where the servers had already expired it or granted it to someone else while the holder (say, paused) did not know.
A red tick is a write the resource rejected for its old token: a former holder acting late, stopped by fencing. Hover any mark for details.</p>
<div class="legend">
{{if .Locks}}<b>locks</b>{{range .Locks}}<span><svg width="26" height="14"><rect width="26" height="14" rx="3" fill="{{.Color}}"/></svg>{{.Name}}</span>{{end}}{{end}}
</div>
<div class="legend">
<b>ops</b>
<span><svg width="26" height="14"><rect width="26" height="14" rx="3" fill="#3b6fb6"/></svg>grant held</span>
<span><svg width="26" height="14"><rect width="26" height="14" rx="3" fill="#3b6fb6"/><rect width="26" height="14" rx="3" fill="url(#gone)"/></svg>lost on the servers, holder unaware</span>
<span><svg width="26" height="14"><rect width="26" height="14" rx="3" fill="#3b6fb6" fill-opacity="0.3" stroke="#3b6fb6" stroke-dasharray="3 2"/></svg>no longer renewed</span>
<span><svg width="26" height="14"><line x1="0" x2="26" y1="7" y2="7" stroke="#3b6fb6" stroke-width="1.5" stroke-dasharray="2 2"/></svg>waiting to acquire</span>
<span><svg width="8" height="14"><rect x="3" width="2" height="14" fill="#2e9e44"/></svg>write accepted</span>
<span><svg width="16" height="18"><rect x="6" y="0" width="4" height="18" fill="#e00000"/><path d="M1 0h14l-7 8z" fill="#e00000"/></svg>stale write rejected</span>
<span><svg width="10" height="10"><circle cx="5" cy="5" r="3" fill="#4a4a4a" stroke="#4a4a4a"/></svg>read</span>
<span><svg width="10" height="10"><circle cx="5" cy="5" r="3" fill="#fff" stroke="#4a4a4a" stroke-width="1.2"/></svg>not found</span>
<span><svg width="14" height="10"><path d="M4 2l6 6m0 -6l-6 6" stroke="#9a9a9a" stroke-width="1.5"/></svg>failed</span>
<span><svg width="24" height="14"><rect width="24" height="14" fill="url(#hatch)" stroke="#8a8a8a" stroke-width="0.8"/></svg>unknown outcome</span>
</div>
<div class="legend">
<b>servers</b>
<span><svg width="6" height="14"><rect x="2" width="2" height="14" fill="#3b6fb6"/></svg>grant applied</span>
<span><svg width="6" height="10"><rect x="2" width="2" height="10" fill="#8a8a8a"/></svg>release applied</span>
<span><svg width="10" height="10"><path d="M1.5 1.5l7 7m0 -7l-7 7" stroke="#c0561a" stroke-width="2"/></svg>session expired</span>
<span><svg width="30" height="14"><rect x="2" y="1" width="26" height="12" rx="3" fill="none" stroke="#d00000" stroke-width="2.5"/></svg>in a violation</span>
{{if .FaultKinds}}<b>faults</b>{{range .FaultKinds}}<span>{{if .Marker}}<svg width="14" height="14"><path d="M7 0l7 7l-7 7l-7 -7z" fill="{{.Color}}"/></svg>{{else}}<svg width="26" height="14"><rect width="26" height="14" fill="{{.Color}}" fill-opacity="0.45" stroke="{{.Color}}" stroke-dasharray="5 3"/></svg>{{end}}{{.Name}}</span>{{end}}{{end}}
</div>
{{if .Empty}}<p><em>The history is empty.</em></p>{{end}}
{{.Overview}}
<div class="timeline">
<div class="labels">{{.Labels}}</div>
<div class="scroll" id="scroll">{{.Timeline}}</div>
</div>
<footer>history.jsonl, summary.json and violations.json sit next to this file. {{if .Overview}}The timeline is {{.Width}} px wide: scroll it sideways, or click the overview strip above it.{{end}}</footer>
<script>
(function () {
  var sc = document.getElementById("scroll");
  function go(x) {
    sc.scrollLeft = Math.max(0, x - sc.clientWidth / 3);
    sc.parentNode.scrollIntoView({block: "start"});
  }
  document.querySelectorAll("a[data-x]").forEach(function (a) {
    a.addEventListener("click", function (e) {
      e.preventDefault();
      go(+a.getAttribute("data-x"));
      var el = document.getElementById(a.getAttribute("href").slice(1));
      if (el) { el.classList.remove("flash"); void el.getBoundingClientRect(); el.classList.add("flash"); }
      history.replaceState(null, "", a.getAttribute("href"));
    });
  });
  var ov = document.getElementById("overview"), view = document.getElementById("overview-view");
  if (ov) {
    var w = +ov.getAttribute("data-width");
    ov.addEventListener("click", function (e) {
      var r = ov.getBoundingClientRect();
      sc.scrollLeft = (e.clientX - r.left) / r.width * w - sc.clientWidth / 2;
    });
    var show = function () { view.setAttribute("x", sc.scrollLeft); view.setAttribute("width", sc.clientWidth); };
    sc.addEventListener("scroll", show); window.addEventListener("resize", show); show();
  }
  if (location.hash) {
    var a = document.querySelector('a[href="' + location.hash + '"][data-x]');
    if (a) go(+a.getAttribute("data-x"));
  }
})();
</script>
</body>
</html>
`))
