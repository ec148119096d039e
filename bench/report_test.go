package bench

import (
	"bytes"
	"encoding/csv"
	"encoding/xml"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
)

var errTestFailure = errors.New("test failure")

func sampleReport() *Report {
	saved := 0.75
	rep := &Report{Started: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), Targets: []string{"direct", "proxy <&>"},
		Baseline: "direct", KeyDist: "zipf", Duration: "10s", Spec: Spec{Databases: 1, Tables: 2, Partitions: 3, Columns: 4, Params: 5}}
	rep.Rows = []Row{
		{Op: "getTable", Phase: "warm", Load: "c=8", Target: "direct", Count: 100, P50: 2, P90: 3, P99: 4, P999: 5, Max: 6, Mean: 2.5, Throughput: 1000},
		{Op: "getTable", Phase: "warm", Load: "c=8", Target: "proxy <&>", Count: 100, Errors: 1, P50: 0.5, P90: 0.6, P99: 9, P999: 10, Max: 11, Mean: 0.7, Throughput: 1000, Reads: 100, Saved: &saved},
		{Op: "trino-planning/get_table_statistics_req", Phase: "warm", Load: "c=8", Target: "direct", Unsupported: 100},
	}
	rep.fillRatios()
	return rep
}

func TestReportRatios(t *testing.T) {
	rep := sampleReport()
	if got := rep.Rows[0].RatioP50; got != 1 {
		t.Errorf("baseline ratio: got %v; want 1", got)
	}
	if got := rep.Rows[1].RatioP50; got != 0.25 {
		t.Errorf("proxy ratio: got %v; want 0.25", got)
	}
	if got := rep.Rows[2].RatioP50; got != 0 {
		t.Errorf("empty row ratio: got %v; want 0", got)
	}
}

func TestReportJSONRoundTrip(t *testing.T) {
	rep := sampleReport()
	var buf bytes.Buffer
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	got, err := ReadJSON(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, rep) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, rep)
	}
}

func TestReportCSV(t *testing.T) {
	var buf bytes.Buffer
	if err := sampleReport().WriteCSV(&buf); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	wantHeader := "op,phase,load,target,count,errors,unsupported,p50_ms,p90_ms,p99_ms,p999_ms,max_ms,mean_ms,throughput_per_s,ratio_p50,reads,saved,reply_bytes"
	if got := strings.Join(recs[0], ","); got != wantHeader {
		t.Errorf("header: got %s; want %s", got, wantHeader)
	}
	if len(recs) != 4 {
		t.Fatalf("got %d records; want header and 3 rows", len(recs))
	}
	if got := recs[2]; got[3] != "proxy <&>" || got[7] != "0.5" || got[14] != "0.25" || got[16] != "0.75" {
		t.Errorf("proxy row: got %v", got)
	}
}

func TestReportSVGWellFormed(t *testing.T) {
	for _, rep := range []*Report{sampleReport(), {Targets: []string{"a"}}} {
		var buf bytes.Buffer
		if err := rep.WriteSVG(&buf); err != nil {
			t.Fatal(err)
		}
		d := xml.NewDecoder(&buf)
		var root string
		rects := 0
		for {
			tok, err := d.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("SVG is not well-formed XML: %v", err)
			}
			if se, ok := tok.(xml.StartElement); ok {
				if root == "" {
					root = se.Name.Local
				}
				if se.Name.Local == "rect" {
					rects++
				}
			}
		}
		if root != "svg" {
			t.Errorf("root element %q; want svg", root)
		}
		if len(rep.Rows) > 0 && rects < 3 { // background, legend, bars
			t.Errorf("got %d rects; want bars", rects)
		}
	}
}

func TestReportTable(t *testing.T) {
	var buf bytes.Buffer
	if err := sampleReport().WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"p50 vs direct", "0.25x", "75.0%", "getTable", "trino-planning/get_table_statistics_req"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestParseOutcomes(t *testing.T) {
	const text = `# HELP hmsproxy_requests_total Calls.
# TYPE hmsproxy_requests_total counter
hmsproxy_requests_total{method="get_table",outcome="hit"} 10
hmsproxy_requests_total{method="get_all_tables",outcome="hit"} 5
hmsproxy_requests_total{outcome="miss",method="get_table"} 3
hmsproxy_requests_total{method="odd \"name\", x",outcome="coalesced"} 2e0
hmsproxy_requests_total_other{outcome="hit"} 99
hmsproxy_requests_totalx 7
hmsproxy_cache_requests_total{kind="table",outcome="hit"} 1000
`
	got, err := parseOutcomes(strings.NewReader(text), "hmsproxy_requests_total")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"hit": 15, "miss": 3, "coalesced": 2}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v; want %v", got, want)
	}
	var r Row
	r.setSaved(map[string]float64{"hit": 5}, got)
	if r.Reads != 15 || r.Saved == nil || *r.Saved != 12.0/15 {
		t.Errorf("saved: reads %d saved %v; want 15 and 0.8", r.Reads, r.Saved)
	}
}
