package admin

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hmsproxy/hmsproxy/ops/housekeeping"
)

// WarmUp is the cache warm-up; *housekeeping.WarmUp implements it.
type WarmUp interface {
	Progress() housekeeping.WarmUpProgress
	Start(targets []housekeeping.Target) error
}

// maxWarmUpBody bounds the body of POST /cache/warm.
const maxWarmUpBody = 1 << 20

// warmUpRequest is the body of POST /cache/warm.
type warmUpRequest struct {
	Targets []string `json:"targets"`
}

// startWarmUp starts a warm-up of the targets in the body: 202 when it
// started, 409 while one runs, 400 for bad targets.
func (s *Server) startWarmUp(w http.ResponseWriter, r *http.Request) {
	if s.cfg.WarmUp == nil {
		writeJSON(w, http.StatusNotImplemented, map[string]string{"error": "no warm-up (no cache, or kerberos.enabled)"})
		return
	}
	var req warmUpRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxWarmUpBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || len(req.Targets) == 0 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": `want {"targets": ["db", "db.table", ...]}`})
		return
	}
	targets, err := housekeeping.ParseTargets(req.Targets)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	if err := s.cfg.WarmUp.Start(targets); err != nil {
		code := http.StatusInternalServerError
		if errors.Is(err, housekeeping.ErrWarmUpRunning) {
			code = http.StatusConflict
		}
		writeJSON(w, code, map[string]string{"error": err.Error()})
		return
	}
	detail := strings.Join(req.Targets, ",")
	s.events.add(event{Time: time.Now(), Type: "warm-up", Detail: detail})
	s.log.Info("cache warm-up started", append([]any{"targets", req.Targets}, caller(r, s.authName())...)...)
	writeJSON(w, http.StatusAccepted, map[string]any{"started": req.Targets})
}

// warmUpProgress answers GET /cache/warm with the latest run.
func (s *Server) warmUpProgress(w http.ResponseWriter, r *http.Request) {
	if st := takeWarmUp(s.cfg.WarmUp, time.Now()); st != nil {
		writeJSON(w, http.StatusOK, st)
		return
	}
	writeJSON(w, http.StatusNotImplemented, map[string]string{"error": "no warm-up (no cache, or kerberos.enabled)"})
}

// warmUpStatus is the latest warm-up on /status.json and GET /cache/warm.
type warmUpStatus struct {
	Targets         []string   `json:"targets"`
	Running         bool       `json:"running"`
	Started         *time.Time `json:"started"`
	Finished        *time.Time `json:"finished"`
	Tables          int64      `json:"tables"`
	TablesDone      int64      `json:"tables_done"`
	PartitionsFound int64      `json:"partitions_found"`
	Partitions      int64      `json:"partitions"`
	Errors          int64      `json:"errors"`
	LastError       string     `json:"last_error"`
	Rate            float64    `json:"partitions_per_second"`
	ETA             float64    `json:"eta_seconds"`
	Runs            uint64     `json:"runs"`
}

func takeWarmUp(src WarmUp, now time.Time) *warmUpStatus {
	if src == nil {
		return nil
	}
	p := src.Progress()
	st := &warmUpStatus{Targets: p.Targets, Running: p.Running, Tables: p.Tables, TablesDone: p.TablesDone,
		PartitionsFound: p.PartitionsFound, Partitions: p.Partitions, Errors: p.Errors, LastError: p.LastError,
		Rate: p.Rate(now), ETA: p.ETA(now).Seconds(), Runs: p.Runs}
	if st.Targets == nil {
		st.Targets = []string{}
	}
	if !p.Started.IsZero() {
		st.Started = ptr(p.Started)
	}
	if !p.Finished.IsZero() {
		st.Finished = ptr(p.Finished)
	}
	return st
}

// warmUpCollector exports the latest warm-up, read at scrape time.
type warmUpCollector struct {
	src                                           WarmUp
	running, tables, partitions, errs, rate, runs *prometheus.Desc
}

func newWarmUpCollector(src WarmUp) *warmUpCollector {
	return &warmUpCollector{
		src: src,
		running: prometheus.NewDesc("hmsproxy_warmup_running",
			"1 while a cache warm-up runs.", nil, nil),
		tables: prometheus.NewDesc("hmsproxy_warmup_tables",
			"Tables of the latest warm-up: found (to load) and done (loaded, with or without error).", []string{"state"}, nil),
		partitions: prometheus.NewDesc("hmsproxy_warmup_partitions",
			"Partitions of the latest warm-up: found (names listed) and loaded.", []string{"state"}, nil),
		errs: prometheus.NewDesc("hmsproxy_warmup_errors",
			"Tables or listings of the latest warm-up that failed.", nil, nil),
		rate: prometheus.NewDesc("hmsproxy_warmup_partitions_per_second",
			"Partitions loaded per second by the latest warm-up, over its run so far.", nil, nil),
		runs: prometheus.NewDesc("hmsproxy_warmup_runs_total",
			"Warm-ups finished, failed or cancelled ones included.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *warmUpCollector) Describe(ch chan<- *prometheus.Desc) {
	describe(ch, c.running, c.tables, c.partitions, c.errs, c.rate, c.runs)
}

// Collect implements prometheus.Collector.
func (c *warmUpCollector) Collect(ch chan<- prometheus.Metric) {
	p := c.src.Progress()
	ch <- constMetric(c.running, prometheus.GaugeValue, b2f(p.Running))
	ch <- constMetric(c.tables, prometheus.GaugeValue, float64(p.Tables), "found")
	ch <- constMetric(c.tables, prometheus.GaugeValue, float64(p.TablesDone), "done")
	ch <- constMetric(c.partitions, prometheus.GaugeValue, float64(p.PartitionsFound), "found")
	ch <- constMetric(c.partitions, prometheus.GaugeValue, float64(p.Partitions), "loaded")
	ch <- constMetric(c.errs, prometheus.GaugeValue, float64(p.Errors))
	ch <- constMetric(c.rate, prometheus.GaugeValue, p.Rate(time.Now()))
	ch <- constMetric(c.runs, prometheus.CounterValue, float64(p.Runs))
}
