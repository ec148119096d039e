package admin

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// screenshotArtifact is where the browser test leaves its screenshot, for
// the README and reviews.
const screenshotArtifact = "../dashboards/status-page.png"

// chromium runs Debian's headless chromium on url with args; the budget
// of virtual time lets the page's script fetch /status.json and render.
func chromium(t *testing.T, url string, args ...string) []byte {
	t.Helper()
	if os.Getenv("HMSPROXY_SKIP_BROWSER") == "1" {
		t.Skip("HMSPROXY_SKIP_BROWSER=1")
	}
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium not found; run scripts/browser-deps.sh (or set HMSPROXY_SKIP_BROWSER=1 to skip this test)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--disable-extensions", "--user-data-dir=" + t.TempDir(),
		"--virtual-time-budget=5000"}
	cmd := exec.CommandContext(ctx, bin, append(append(base, args...), url)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.Bytes()
}

// domCell finds, in row id of the dumped DOM, the cell of field: its raw
// data-value and its text.
func domCell(t *testing.T, dom, rowID, field string) (value, text string) {
	t.Helper()
	row := regexp.MustCompile(`<tr id="` + regexp.QuoteMeta(rowID) + `">(.*?)</tr>`).FindStringSubmatch(dom)
	if row == nil {
		t.Fatalf("row %s not in the page", rowID)
	}
	m := regexp.MustCompile(`<td[^>]*\bdata-field="` + field + `"[^>]*\bdata-value="([^"]*)"[^>]*>([^<]*)`).FindStringSubmatch(row[1])
	if m == nil {
		t.Fatalf("row %s has no %s cell: %s", rowID, field, row[1])
	}
	return m[1], m[2]
}

// domByID is the data-value and text of the element with id.
func domByID(t *testing.T, dom, id string) (value, text string) {
	t.Helper()
	m := regexp.MustCompile(`<[a-z]+ id="` + regexp.QuoteMeta(id) + `"(?: [^>]*data-value="([^"]*)")?[^>]*>([^<]*)`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("element %s not in the page", id)
	}
	return m[1], m[2]
}

// TestStatusPageBrowser loads the status page in a real headless
// Chromium, checks that the hit ratios and call counts it renders are
// those of /metrics, and saves a screenshot.
func TestStatusPageBrowser(t *testing.T) {
	if os.Getenv("HMSPROXY_SKIP_BROWSER") == "1" {
		t.Skip("HMSPROXY_SKIP_BROWSER=1")
	}
	e := busyEnv(t, 5)
	series, _ := scrape(t, e.url)
	m := fromMetrics{series}

	dom := string(chromium(t, e.url+"/", "--dump-dom"))
	if !strings.Contains(dom, `data-loaded="1"`) {
		t.Fatalf("the page's script did not render /status.json:\n%s", dom)
	}

	checked := 0
	for _, kind := range []string{"table", "database_names", "partition_names", "partition"} {
		want, ok := m.kindRatio(kind)
		if !ok {
			if strings.Contains(dom, `id="kind-`+kind+`"`) {
				t.Errorf("kind %s has no reads but a row", kind)
			}
			continue
		}
		value, text := domCell(t, dom, "kind-"+kind, "hit_ratio")
		got, err := strconv.ParseFloat(value, 64)
		if err != nil || got != want {
			t.Errorf("kind %s: page hit ratio %q; /metrics gives %v", kind, value, want)
		}
		pct, err := strconv.ParseFloat(strings.TrimSuffix(text, "%"), 64)
		if err != nil || !strings.HasSuffix(text, "%") || math.Abs(pct-want*100) > 0.05+1e-9 {
			t.Errorf("kind %s: page shows %q; /metrics gives %.3f%%", kind, text, want*100)
		}
		checked++
	}
	if checked < 3 {
		t.Errorf("only %d kinds had reads; want table, database_names and partition_names", checked)
	}

	for _, method := range []string{"get_table", "get_all_databases", "get_partition_names", "other"} {
		value, text := domCell(t, dom, "method-"+method, "calls")
		if want := fmt.Sprint(m.methodCalls(method)); value != want || text != want {
			t.Errorf("method %s: page shows %q calls; /metrics gives %s", method, text, want)
		}
		for _, o := range []string{"hit", "miss", "passthrough"} {
			if _, text := domCell(t, dom, "method-"+method, o); text != fmt.Sprint(m.method(method, o)) {
				t.Errorf("method %s: page shows %s %s; /metrics gives %v", method, o, text, m.method(method, o))
			}
		}
	}
	if _, text := domByID(t, dom, "calls-total"); text != fmt.Sprint(m.totalCalls()) {
		t.Errorf("page shows %s client calls; /metrics gives %v", text, m.totalCalls())
	}
	if value, _ := domByID(t, dom, "bus-applied"); value != fmt.Sprint(series["hmsproxy_bus_applied_total"]) {
		t.Errorf("page shows %s bus invalidations applied; /metrics gives %v", value, series["hmsproxy_bus_applied_total"])
	}
	for q, id := range map[string]string{"0.5": "bus-lag-p50", "0.99": "bus-lag-p99"} {
		value, _ := domByID(t, dom, id)
		want := series[`hmsproxy_bus_lag_seconds{quantile="`+q+`"}`]
		if got, err := strconv.ParseFloat(value, 64); err != nil || got != want {
			t.Errorf("page shows bus lag %s %q; /metrics gives %v", id, value, want)
		}
	}
	for _, want := range []string{"hive.demo_db1.t2", "undecodable", "eventlog-poller", "connection reset", e.upAddr} {
		if !strings.Contains(dom, want) {
			t.Errorf("page does not show %q", want)
		}
	}

	shot := filepath.Join(t.TempDir(), "status-page.png")
	chromium(t, e.url+"/", "--screenshot="+shot, "--window-size=1280,900", "--hide-scrollbars")
	b, err := os.ReadFile(shot)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	if r := img.Bounds(); r.Dx() != 1280 || r.Dy() != 900 {
		t.Errorf("screenshot is %dx%d; want 1280x900", r.Dx(), r.Dy())
	}
	// The committed screenshot is refreshed on request only, so a test
	// run leaves the work tree clean.
	if os.Getenv("HMSPROXY_UPDATE_SCREENSHOT") == "1" {
		if err := os.WriteFile(screenshotArtifact, b, 0o644); err != nil {
			t.Errorf("copy screenshot to %s: %v", screenshotArtifact, err)
		}
	}
	t.Logf("screenshot: %s (HMSPROXY_UPDATE_SCREENSHOT=1 copies it to dashboards/status-page.png)", shot)
}
