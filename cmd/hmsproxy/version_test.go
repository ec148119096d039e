package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// writeConfig writes body as a config file and returns its path.
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBuildInfoMetric (issue 23): hmsproxy_build_info says which build
// runs.
func TestBuildInfoMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	if err := registerBuildInfo(reg, buildInfo{version: "v9", goVersion: "go1.x", revision: "abc"}); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			got = append(got, fmt.Sprintf("%s %v %g", mf.GetName(), labels, m.GetGauge().GetValue()))
		}
	}
	want := "hmsproxy_build_info map[goversion:go1.x revision:abc version:v9] 1"
	if len(got) != 1 || got[0] != want {
		t.Errorf("got %q; want %q", got, want)
	}
}

// TestVersionFlag (issue 23): --version prints the version set at build
// time, and --print-defaults a file the binary starts from.
func TestVersionFlag(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "hmsproxy")
	if out, err := exec.Command("go", "build", "-ldflags", "-X main.version=v1.2.3-test -X main.revision=abc123", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "hmsproxy v1.2.3-test (revision abc123, ") {
		t.Errorf("got %q, %v; want hmsproxy v1.2.3-test (revision abc123, ...)", out, err)
	}
	def, err := exec.Command(bin, "--print-defaults").Output()
	if err != nil {
		t.Fatal(err)
	}
	// The defaults name no upstream: the binary must say so, and nothing else.
	out, err = exec.Command(bin, "--config", writeConfig(t, string(def))).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no upstream") {
		t.Errorf("got %q, %v; want the no-upstream error alone", out, err)
	}
}
