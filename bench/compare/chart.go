package main

import (
	"fmt"
	"html"
	"math"
	"strings"

	"github.com/fenced-dev/fenced/bench"
)

// chartPanel is one grouped bar chart: a group per case, a bar per target.
type chartPanel struct {
	Title  string
	Unit   string
	Groups []chartGroup
}

type chartGroup struct {
	Label string
	Bars  []chartBar
}

type chartBar struct {
	Target string
	Value  float64
}

// targetColors gives each target one colour across panels.
var targetColors = map[string]string{
	"fenced":    "#2b6cb0",
	"fenced-3":  "#90cdf4",
	"etcd":      "#2f855a",
	"etcd-3":    "#9ae6b4",
	"zookeeper": "#b7791f",
	"redis":     "#c53030",
}

// chartPanels builds the panels from the medians: throughput and p99
// acquire latency of the cycle workloads, and the server memory of the
// sessions workload.
func chartPanels(cases []benchCase, sums map[summaryKey]summary) []chartPanel {
	thr := chartPanel{Title: "Throughput (median cycles/s, higher is better)", Unit: "/s"}
	lat := chartPanel{Title: "Acquire latency p99 (median ms, lower is better)", Unit: " ms"}
	mem := chartPanel{Title: "Server RSS with all holders open (median MiB, lower is better)", Unit: " MiB"}
	for _, c := range cases {
		// The limiter's batched decisions/s would dwarf every other bar.
		if c.Workload == workloadElection || c.Workload == bench.WorkloadLimiter {
			continue
		}
		var tg, lg, mg chartGroup
		tg.Label, lg.Label, mg.Label = c.ID, c.ID, c.ID
		for _, t := range c.Targets {
			s := sums[summaryKey{c.ID, t}]
			if s.Runs == 0 {
				continue
			}
			if c.Workload == bench.WorkloadSessions {
				mg.Bars = append(mg.Bars, chartBar{t, s.RSSMiB})
				continue
			}
			tg.Bars = append(tg.Bars, chartBar{t, s.CyclesPerS})
			lg.Bars = append(lg.Bars, chartBar{t, s.P99Ms})
		}
		if len(tg.Bars) > 0 {
			thr.Groups, lat.Groups = append(thr.Groups, tg), append(lat.Groups, lg)
		}
		if len(mg.Bars) > 0 {
			mem.Groups = append(mem.Groups, mg)
		}
	}
	var out []chartPanel
	for _, p := range []chartPanel{thr, lat, mem} {
		if len(p.Groups) > 0 {
			out = append(out, p)
		}
	}
	return out
}

// Chart geometry, in SVG user units.
const (
	chartWidth   = 960
	panelHeight  = 300
	plotLeft     = 70
	plotRight    = 20
	plotTop      = 40
	plotBottom   = 40
	legendHeight = 40
)

// renderSVG draws the panels one above the other, with one legend.
func renderSVG(panels []chartPanel) string {
	var b strings.Builder
	height := legendHeight + len(panels)*panelHeight
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", chartWidth, height, chartWidth, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	x := float64(plotLeft)
	for _, t := range targets {
		if !usedTarget(panels, t.Name) {
			continue
		}
		fmt.Fprintf(&b, `<rect x="%.0f" y="14" width="14" height="14" fill="%s"/><text x="%.0f" y="26">%s</text>`+"\n", x, targetColors[t.Name], x+18, t.Name)
		x += 110
	}
	for i, p := range panels {
		renderPanel(&b, p, float64(legendHeight+i*panelHeight))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func usedTarget(panels []chartPanel, name string) bool {
	for _, p := range panels {
		for _, g := range p.Groups {
			for _, bar := range g.Bars {
				if bar.Target == name {
					return true
				}
			}
		}
	}
	return false
}

// renderPanel draws one panel with its top edge at y0.
func renderPanel(b *strings.Builder, p chartPanel, y0 float64) {
	plotW := float64(chartWidth - plotLeft - plotRight)
	plotH := float64(panelHeight - plotTop - plotBottom)
	base := y0 + plotTop + plotH
	maxV := 0.0
	for _, g := range p.Groups {
		for _, bar := range g.Bars {
			maxV = math.Max(maxV, bar.Value)
		}
	}
	step := niceStep(maxV / 4)
	top := step * math.Ceil(maxV/step)
	if top <= 0 {
		top = 1
	}
	fmt.Fprintf(b, `<text x="%d" y="%.0f" font-size="14" font-weight="bold">%s</text>`+"\n", plotLeft, y0+22, html.EscapeString(p.Title))
	for v := 0.0; v <= top*1.0001; v += step {
		y := base - v/top*plotH
		fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#e2e8f0"/>`, plotLeft, chartWidth-plotRight, y, y)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end" fill="#4a5568">%s</text>`+"\n", plotLeft-6, y+4, formatValue(v))
	}
	groupW := plotW / float64(len(p.Groups))
	for gi, g := range p.Groups {
		gx := float64(plotLeft) + float64(gi)*groupW
		barW := math.Min(60, groupW*0.8/float64(len(g.Bars)))
		start := gx + (groupW-barW*float64(len(g.Bars)))/2
		for bi, bar := range g.Bars {
			h := bar.Value / top * plotH
			x := start + float64(bi)*barW
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %s%s</title></rect>`+"\n",
				x, base-h, barW-2, h, targetColors[bar.Target], html.EscapeString(g.Label), bar.Target, formatValue(bar.Value), p.Unit)
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="10">%s</text>`+"\n", x+barW/2-1, base-h-3, formatValue(bar.Value))
		}
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", gx+groupW/2, base+18, html.EscapeString(g.Label))
	}
	fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#2d3748"/>`+"\n", plotLeft, chartWidth-plotRight, base, base)
}

// niceStep rounds x up to 1, 2 or 5 times a power of ten.
func niceStep(x float64) float64 {
	if x <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x {
			return m * p
		}
	}
	return 10 * p
}

// formatValue prints a figure with sensible precision.
func formatValue(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// writeSVG writes the chart of sums to path.
func writeSVG(path string, cases []benchCase, sums map[summaryKey]summary) error {
	return writeFile(path, []byte(renderSVG(chartPanels(cases, sums))))
}
