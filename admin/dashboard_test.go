package admin

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const dashboardFile = "../dashboards/hmsproxy.json"

// notYetExported are the metric families the dashboard uses before
// hmsproxy exports them. Each line names who adds it; delete the line
// when it lands, and the test then checks the family like any other.
var notYetExported = map[string]string{}

type dashPanel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		Expr       string `json:"expr"`
		Datasource *struct {
			UID string `json:"uid"`
		} `json:"datasource"`
	} `json:"targets"`
	Panels []dashPanel `json:"panels"` // a row's, when collapsed
}

type dashboard struct {
	SchemaVersion int         `json:"schemaVersion"`
	Title         string      `json:"title"`
	UID           string      `json:"uid"`
	Panels        []dashPanel `json:"panels"`
	Templating    struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

// metricRef matches the metric names in a PromQL expression: ours and
// those of the Go and process collectors.
var metricRef = regexp.MustCompile(`\b(?:hmsproxy|go|process)_[a-zA-Z0-9_:]*`)

// family is the family a series name belongs to: histograms and
// summaries expose name_bucket, name_sum and name_count.
func family(name string, families map[string]bool) string {
	if families[name] {
		return name
	}
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suf); ok && (families[base] || notYetExported[base] != "") {
			return base
		}
	}
	return name
}

// TestDashboardMetricsExist: every metric a panel of
// dashboards/hmsproxy.json queries is in a scrape of a running proxy
// (with a cache, a bus and workers), so the dashboard never shows an
// empty panel for a misspelt name (issue 6).
func TestDashboardMetricsExist(t *testing.T) {
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.SchemaVersion < 36 || d.UID == "" || d.Title == "" {
		t.Errorf("schemaVersion %d, uid %q, title %q; want >= 36 and both set", d.SchemaVersion, d.UID, d.Title)
	}
	dsVar := false
	for _, v := range d.Templating.List {
		dsVar = dsVar || (v.Name == "datasource" && v.Type == "datasource" && v.Query == "prometheus")
	}
	if !dsVar {
		t.Error("no templated Prometheus data source variable named datasource")
	}

	e := startEnv(t, envOpts{bus: true, workers: newFakeWorkers(), eventLog: true})
	traffic(t, e)
	_, families := scrape(t, e.url)

	var panels []dashPanel
	var walk func([]dashPanel)
	walk = func(ps []dashPanel) {
		for _, p := range ps {
			panels = append(panels, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)

	used := map[string][]string{} // family -> panels using it
	ids := map[int]string{}
	var titles []string
	for _, p := range panels {
		if other, dup := ids[p.ID]; dup {
			t.Errorf("panels %q and %q share id %d", other, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		if p.Type == "row" {
			continue
		}
		titles = append(titles, p.Title)
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: data source %+v; want the ${datasource} variable", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no queries", p.Title)
		}
		for _, tg := range p.Targets {
			if tg.Datasource == nil || tg.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q: a query's data source is not the ${datasource} variable", p.Title)
			}
			names := metricRef.FindAllString(tg.Expr, -1)
			if len(names) == 0 {
				t.Errorf("panel %q: no metric in %q", p.Title, tg.Expr)
			}
			for _, n := range names {
				f := family(n, families)
				used[f] = append(used[f], p.Title)
			}
		}
	}
	for f, ps := range used {
		switch {
		case families[f]:
		case notYetExported[f] != "":
			t.Logf("%s is not exported yet (%s); used by %q", f, notYetExported[f], ps)
		default:
			t.Errorf("%s, used by %q, is not in /metrics", f, ps)
		}
	}
	for _, want := range []string{
		"Hit ratio per kind", "Hit ratio per method", "Request rate by outcome",
		"Latency percentiles by path", "Upstream load saved", "Invalidation bus lag",
		"Event-log lag", "Cache bytes by kind",
	} {
		if !slices.Contains(titles, want) {
			t.Errorf("no panel %q", want)
		}
	}
}
