package bench

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Row is one series: an operation (or a mix's step, "mix/method") in a
// phase at a load level against one target. Latencies are milliseconds.
type Row struct {
	Op          string  `json:"op"`
	Phase       string  `json:"phase"`
	Load        string  `json:"load"`
	Target      string  `json:"target"`
	Count       int     `json:"count"`
	Errors      int64   `json:"errors"`
	Unsupported int64   `json:"unsupported"`
	P50         float64 `json:"p50_ms"`
	P90         float64 `json:"p90_ms"`
	P99         float64 `json:"p99_ms"`
	P999        float64 `json:"p999_ms"`
	Max         float64 `json:"max_ms"`
	Mean        float64 `json:"mean_ms"`
	Throughput  float64 `json:"throughput_per_s"`
	// RatioP50 is this target's p50 over the baseline's in the same op,
	// phase and load (1 for the baseline; 0 when either has no samples).
	RatioP50 float64 `json:"ratio_p50"`
	// Reads is the cacheable reads the proxy counted in the window (hits,
	// misses, coalesced), and Saved the share of them answered without an
	// upstream call; both only for targets with a metrics URL.
	Reads int64    `json:"reads,omitempty"`
	Saved *float64 `json:"saved,omitempty"`
	// ReplyBytes is the mean size of a call's reply bodies: a ratio
	// reads by the bytes moved.
	ReplyBytes float64 `json:"reply_bytes"`
}

// Report is the result of a run.
type Report struct {
	Started  time.Time `json:"started"`
	Targets  []string  `json:"targets"`
	Baseline string    `json:"baseline"`
	KeyDist  string    `json:"key_dist"`
	Duration string    `json:"duration"`
	Spec     Spec      `json:"spec"`
	Rows     []Row     `json:"rows"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func newRow(op, phase, load, target string, h *Hist, elapsed time.Duration) Row {
	r := Row{Op: op, Phase: phase, Load: load, Target: target, Count: h.Count(),
		Errors: h.Errors, Unsupported: h.Unsupported,
		P50: ms(h.Percentile(50)), P90: ms(h.Percentile(90)), P99: ms(h.Percentile(99)),
		P999: ms(h.Percentile(99.9)), Max: ms(h.Max()), Mean: ms(h.Mean())}
	if elapsed > 0 {
		r.Throughput = float64(h.Count()) / elapsed.Seconds()
	}
	if h.Count() > 0 {
		r.ReplyBytes = float64(h.Bytes) / float64(h.Count())
	}
	return r
}

// setSaved fills Reads and Saved from two scrapes of the outcome counters.
func (r *Row) setSaved(before, after map[string]float64) {
	d := func(o string) float64 { return max(after[o]-before[o], 0) }
	reads := d("hit") + d("miss") + d("coalesced")
	r.Reads = int64(reads)
	if reads > 0 {
		s := (d("hit") + d("coalesced")) / reads
		r.Saved = &s
	}
}

// fillRatios sets RatioP50 of every row against the baseline's row.
func (rep *Report) fillRatios() {
	type key struct{ op, phase, load string }
	base := map[key]float64{}
	for _, r := range rep.Rows {
		if r.Target == rep.Baseline {
			base[key{r.Op, r.Phase, r.Load}] = r.P50
		}
	}
	for i := range rep.Rows {
		r := &rep.Rows[i]
		if b := base[key{r.Op, r.Phase, r.Load}]; b > 0 && r.P50 > 0 {
			r.RatioP50 = r.P50 / b
		}
	}
}

func fmtMS(v float64) string {
	switch {
	case v == 0:
		return "-"
	case v < 1:
		return strconv.FormatFloat(v, 'f', 3, 64)
	case v < 100:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

// WriteTable renders the report as an aligned text table.
func (rep *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "operation\tphase\tload\ttarget\tcount\terr\tskip\tp50 ms\tp90 ms\tp99 ms\tp99.9 ms\tmax ms\tmean ms\tops/s\tbytes\tp50 vs %s\tsaved\t\n", rep.Baseline)
	for _, r := range rep.Rows {
		ratio := "-"
		if r.RatioP50 > 0 {
			ratio = fmt.Sprintf("%.2fx", r.RatioP50)
		}
		saved := ""
		if r.Saved != nil {
			saved = fmt.Sprintf("%.1f%%", 100**r.Saved)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%.0f\t%.0f\t%s\t%s\t\n",
			r.Op, r.Phase, r.Load, r.Target, r.Count, r.Errors, r.Unsupported,
			fmtMS(r.P50), fmtMS(r.P90), fmtMS(r.P99), fmtMS(r.P999), fmtMS(r.Max), fmtMS(r.Mean),
			r.Throughput, r.ReplyBytes, ratio, saved)
	}
	return tw.Flush()
}

// WriteJSON writes the report as indented JSON.
func (rep *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// ReadJSON reads a report written by WriteJSON.
func ReadJSON(r io.Reader) (*Report, error) {
	var rep Report
	if err := json.NewDecoder(r).Decode(&rep); err != nil {
		return nil, fmt.Errorf("bench: read report: %w", err)
	}
	return &rep, nil
}

// CSVHeader is the first line WriteCSV writes.
var CSVHeader = []string{"op", "phase", "load", "target", "count", "errors", "unsupported",
	"p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms", "mean_ms", "throughput_per_s", "ratio_p50", "reads", "saved", "reply_bytes"}

// WriteCSV writes one line per row under CSVHeader.
func (rep *Report) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write(CSVHeader)
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	for _, r := range rep.Rows {
		saved := ""
		if r.Saved != nil {
			saved = f(*r.Saved)
		}
		cw.Write([]string{r.Op, r.Phase, r.Load, r.Target, strconv.Itoa(r.Count),
			strconv.FormatInt(r.Errors, 10), strconv.FormatInt(r.Unsupported, 10),
			f(r.P50), f(r.P90), f(r.P99), f(r.P999), f(r.Max), f(r.Mean), f(r.Throughput),
			f(r.RatioP50), strconv.FormatInt(r.Reads, 10), saved, f(r.ReplyBytes)})
	}
	cw.Flush()
	return cw.Error()
}

// opRows are the rows of whole operations (not a mix's steps).
func (rep *Report) opRows() []Row {
	var out []Row
	for _, r := range rep.Rows {
		if !strings.Contains(r.Op, "/") {
			out = append(out, r)
		}
	}
	return out
}
