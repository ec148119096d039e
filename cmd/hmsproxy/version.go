package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// version is the release, set at build time by
// -ldflags "-X main.version=v1.2.3" (make build does); empty: the module
// version the go command recorded, "(devel)" for a build in the tree.
var version string

// revision is the commit, set at build time by -ldflags
// "-X main.revision=..." (make build does, so that it does not depend on
// -buildvcs, which GOFLAGS or a tree without .git turn off); empty: the
// vcs.revision the go command recorded, if any.
var revision string

// buildInfo is what --version and the hmsproxy_build_info metric say.
type buildInfo struct {
	version, goVersion, revision string
}

func readBuildInfo() buildInfo {
	b := buildInfo{version: version, goVersion: runtime.Version(), revision: "unknown"}
	if revision != "" {
		b.revision = revision
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		if b.version == "" {
			b.version = "unknown"
		}
		return b
	}
	if b.version == "" {
		b.version = info.Main.Version
	}
	if revision != "" {
		return b
	}
	modified := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.revision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if modified {
		b.revision += "-dirty"
	}
	return b
}

func (b buildInfo) String() string {
	return fmt.Sprintf("hmsproxy %s (revision %s, %s)", b.version, b.revision, b.goVersion)
}

// registerBuildInfo adds hmsproxy_build_info{version,goversion,revision} 1.
func registerBuildInfo(reg prometheus.Registerer, b buildInfo) error {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "hmsproxy_build_info",
		Help:        "The running build: always 1, its labels say which.",
		ConstLabels: prometheus.Labels{"version": b.version, "goversion": b.goVersion, "revision": b.revision}})
	g.Set(1)
	return reg.Register(g)
}
