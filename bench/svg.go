package bench

import (
	"fmt"
	"html"
	"io"
	"math"
	"strconv"
	"strings"
)

var palette = []string{"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f"}

// WriteSVG draws one panel per phase and load: for each operation a bar
// per target at its p50 and a dark tick at its p99, on a log scale.
func (rep *Report) WriteSVG(w io.Writer) error {
	rows := rep.opRows()
	type panelKey struct{ phase, load string }
	var panels []panelKey
	seenPanel := map[panelKey]bool{}
	var opsOrder []string
	seenOp := map[string]bool{}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range rows {
		k := panelKey{r.Phase, r.Load}
		if !seenPanel[k] {
			seenPanel[k] = true
			panels = append(panels, k)
		}
		if !seenOp[r.Op] {
			seenOp[r.Op] = true
			opsOrder = append(opsOrder, r.Op)
		}
		for _, v := range []float64{r.P50, r.P99} {
			if v > 0 {
				lo, hi = min(lo, v), max(hi, v)
			}
		}
	}
	if math.IsInf(lo, 1) {
		lo, hi = 0.01, 1
	}
	decLo, decHi := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if decHi <= decLo {
		decHi = decLo + 1
	}
	const (
		left, right, top  = 70.0, 20.0, 50.0
		panelH, plotH     = 300.0, 220.0
		barW, groupGap    = 14.0, 18.0
		legendH, labelGap = 30.0, 60.0
	)
	nt := max(len(rep.Targets), 1)
	groupW := float64(nt)*barW + groupGap
	width := left + right + math.Max(float64(len(opsOrder))*groupW, 300)
	height := top + legendH + float64(len(panels))*(panelH+labelGap)
	y := func(v, base float64) float64 {
		if v <= 0 {
			return base
		}
		f := (math.Log10(v) - decLo) / (decHi - decLo)
		return base - f*plotH
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?>`+"\n")
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="11">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="22" font-size="15" font-weight="bold">hmsbench: p50 (bar) and p99 (tick) latency per operation, ms, log scale</text>`+"\n", left)
	for i, t := range rep.Targets {
		x := left + float64(i)*130
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="12" height="12" fill="%s"/><text x="%.0f" y="%.0f">%s</text>`+"\n",
			x, top-14, palette[i%len(palette)], x+16, top-4, html.EscapeString(t))
	}
	idx := map[string]int{}
	for i, t := range rep.Targets {
		idx[t] = i
	}
	for p, pk := range panels {
		base := top + legendH + float64(p)*(panelH+labelGap) + plotH
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-weight="bold">%s, %s</text>`+"\n", left, base-plotH-10, html.EscapeString(pk.phase), html.EscapeString(pk.load))
		for d := decLo; d <= decHi; d++ {
			v := math.Pow(10, d)
			yy := y(v, base)
			fmt.Fprintf(&b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#ddd"/><text x="%.0f" y="%.1f" text-anchor="end">%s</text>`+"\n",
				left, yy, width-right, yy, left-6, yy+4, strconv.FormatFloat(v, 'g', -1, 64))
		}
		fmt.Fprintf(&b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#333"/>`+"\n", left, base, width-right, base)
		for g, op := range opsOrder {
			gx := left + float64(g)*groupW + groupGap/2
			for _, r := range rows {
				if r.Op != op || r.Phase != pk.phase || r.Load != pk.load {
					continue
				}
				i := idx[r.Target]
				x := gx + float64(i)*barW
				top50 := y(r.P50, base)
				fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.0f" height="%.1f" fill="%s"><title>%s %s p50 %s ms</title></rect>`+"\n",
					x, top50, barW-2, base-top50, palette[i%len(palette)], html.EscapeString(op), html.EscapeString(r.Target), fmtMS(r.P50))
				if r.P99 > 0 {
					y99 := y(r.P99, base)
					fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#222" stroke-width="2"><title>%s %s p99 %s ms</title></line>`+"\n",
						x, y99, x+barW-2, y99, html.EscapeString(op), html.EscapeString(r.Target), fmtMS(r.P99))
				}
			}
			lx := gx + float64(nt)*barW/2
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" transform="rotate(30 %.1f %.1f)">%s</text>`+"\n", lx, base+14, lx, base+14, html.EscapeString(op))
		}
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
