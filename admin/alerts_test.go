package admin

import (
	"bytes"
	"os"
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"
)

// alertsFile is the plain rules file; the Helm chart carries a copy that
// scripts/deploy-check.sh compares with it.
const alertsFile = "../deploy/prometheus/hmsproxy-alerts.yaml"

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// TestAlertRulesMetricsExist: every metric an alert rule of
// deploy/prometheus/hmsproxy-alerts.yaml queries is in a scrape of a
// running proxy, so no alert waits forever on a misspelt or renamed
// family (a rule on a missing series is never false, never true: it
// just never fires). Issue 15.
//
// The environment must export every family the rules use: the
// invalidation bus (bus peers, layout mismatch), the event log, and
// shadow validation (hmsproxy_shadow_mismatches_total, exported only
// with Config.Shadow set).
func TestAlertRulesMetricsExist(t *testing.T) {
	b, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&rf); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}

	used := map[string][]string{} // family -> rules using it
	var alerts []string
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			name := r.Alert + r.Record
			if r.Alert != "" {
				alerts = append(alerts, r.Alert)
				if s := r.Labels["severity"]; s != "warning" && s != "critical" {
					t.Errorf("alert %s: severity %q; want warning or critical", r.Alert, s)
				}
				if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
					t.Errorf("alert %s: a summary and a description are wanted", r.Alert)
				}
			}
			names := metricRef.FindAllString(r.Expr, -1)
			if len(names) == 0 {
				t.Errorf("rule %s: no metric in %q", name, r.Expr)
			}
			for _, n := range names {
				used[n] = append(used[n], name)
			}
		}
	}
	// The list: a rule dropped from the file fails here.
	for _, want := range []string{
		"HmsproxyInvalidationLosses", "HmsproxyBusPeersSilent", "HmsproxyBusNotSynced",
		"HmsproxyBusLayoutMismatch", "HmsproxyUpstreamDown", "HmsproxyNoHealthyUpstream",
		"HmsproxyShadowMismatches", "HmsproxyHitRatioCollapse", "HmsproxyEventLogLagging",
		"HmsproxyEventLogUnhealthy", "HmsproxyChangeFeedLosses", "HmsproxyChangeFeedStalled",
	} {
		if !slices.Contains(alerts, want) {
			t.Errorf("no alert %s in %s", want, alertsFile)
		}
	}

	e := startEnv(t, envOpts{bus: true, workers: newFakeWorkers(), eventLog: true, shadow: true, changeFeed: fixedFeed{}})
	traffic(t, e)
	series, families := scrape(t, e.url)
	for n, rules := range used {
		if f := family(n, families); !families[f] {
			t.Errorf("%s, used by %q, is not in /metrics", n, rules)
		}
	}

	// Label values the rules select on must be ones the proxy writes.
	for _, s := range []string{
		`hmsproxy_cache_requests_total{kind="table",outcome="hit"}`,
		`hmsproxy_cache_requests_total{kind="table",outcome="miss"}`,
		`hmsproxy_cache_requests_total{kind="table",outcome="coalesced"}`,
		`hmsproxy_bus_peers{state="silent"}`,
	} {
		if _, ok := series[s]; !ok {
			t.Errorf("no series %s in /metrics", s)
		}
	}
}
