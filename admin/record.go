package admin

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hmsproxy/hmsproxy/trace"
)

// Recording starts and stops the recording of client calls to the
// configured trace file; *trace.Recorder implements it.
type Recording interface {
	Start(d time.Duration) error
	Stop()
	Stats() trace.Stats
	Path() string
}

// maxRecordBody bounds a POST /record body: {"for": "24h"}.
const maxRecordBody = 4 << 10

// maxRecordFor bounds how long one POST /record may record: a week,
// after which the operator asks again.
const maxRecordFor = 7 * 24 * time.Hour

type recordRequest struct {
	For string `json:"for"`
}

// recordStatus answers /record: the recording's path and counts.
type recordStatus struct {
	Recording bool       `json:"recording"`
	Path      string     `json:"path"`
	Until     *time.Time `json:"until"`
	Recorded  uint64     `json:"recorded"`
	Elided    uint64     `json:"elided"`
	Dropped   uint64     `json:"dropped"`
	Bytes     uint64     `json:"bytes"`
	Files     uint64     `json:"files_started"`
	Errors    uint64     `json:"write_errors"`
}

func (s *Server) recordStatus() recordStatus {
	st := s.cfg.Recording.Stats()
	out := recordStatus{Recording: st.Recording, Path: s.cfg.Recording.Path(), Recorded: st.Recorded, Elided: st.Elided,
		Dropped: st.Dropped, Bytes: st.Bytes, Files: st.FilesStarted, Errors: st.WriteErrors}
	if !st.Until.IsZero() {
		out.Until = ptr(st.Until)
	}
	return out
}

var errNoRecording = map[string]string{"error": "no recording: start hmsproxy with --record PATH"}

// startRecording answers POST /record: record client calls to the
// configured file, for the duration the body gives ({"for": "24h"}) or
// until DELETE /record. The file is the one configured, never one a
// request names: the admin API does not write where it is told.
func (s *Server) startRecording(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Recording == nil {
		writeJSON(w, http.StatusNotImplemented, errNoRecording)
		return
	}
	var req recordRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRecordBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil && !errors.Is(err, io.EOF) {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": `want no body, or {"for": "24h"}`})
		return
	}
	var d time.Duration
	if req.For != "" {
		var err error
		if d, err = time.ParseDuration(req.For); err != nil || d <= 0 || d > maxRecordFor {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "for: a positive duration of at most 168h"})
			return
		}
	}
	if err := s.cfg.Recording.Start(d); err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	s.events.add(event{Time: time.Now(), Type: "recording", Detail: "started " + req.For})
	s.log.Info("recording started", append([]any{"path", s.cfg.Recording.Path(), "for", d}, caller(r, s.authName())...)...)
	writeJSON(w, http.StatusOK, s.recordStatus())
}

// stopRecording answers DELETE /record once the file is complete.
func (s *Server) stopRecording(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Recording == nil {
		writeJSON(w, http.StatusNotImplemented, errNoRecording)
		return
	}
	s.cfg.Recording.Stop()
	s.events.add(event{Time: time.Now(), Type: "recording", Detail: "stopped"})
	s.log.Info("recording stopped", caller(r, s.authName())...)
	writeJSON(w, http.StatusOK, s.recordStatus())
}

func (s *Server) recordingProgress(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Recording == nil {
		writeJSON(w, http.StatusNotImplemented, errNoRecording)
		return
	}
	writeJSON(w, http.StatusOK, s.recordStatus())
}

// recordCollector exports the recorder's counts, read at scrape time.
type recordCollector struct {
	src                                     Recording
	on, calls, elided, bytes, files, errors *prometheus.Desc
}

func newRecordCollector(src Recording) *recordCollector {
	return &recordCollector{src: src,
		on: prometheus.NewDesc("hmsproxy_recording",
			"1 while client calls are being recorded (--record, POST /record).", nil, nil),
		calls: prometheus.NewDesc("hmsproxy_record_calls_total",
			"Client calls recorded: written to the trace, or dropped (no buffer room, or a failed write).", []string{"result"}, nil),
		elided: prometheus.NewDesc("hmsproxy_record_elided_total",
			"Client calls queued without their args for lack of buffer room (their size is kept).", nil, nil),
		bytes: prometheus.NewDesc("hmsproxy_record_bytes_total",
			"Bytes of records written to the trace files.", nil, nil),
		files: prometheus.NewDesc("hmsproxy_record_files_total",
			"Trace files begun (a start, or a rotation).", nil, nil),
		errors: prometheus.NewDesc("hmsproxy_record_write_errors_total",
			"Failed writes, rotations or removals of trace files; the records of a failed write are dropped.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *recordCollector) Describe(ch chan<- *prometheus.Desc) {
	describe(ch, c.on, c.calls, c.elided, c.bytes, c.files, c.errors)
}

// Collect implements prometheus.Collector.
func (c *recordCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.src.Stats()
	ch <- constMetric(c.on, prometheus.GaugeValue, b2f(st.Recording))
	ch <- constMetric(c.calls, prometheus.CounterValue, float64(st.Recorded), "written")
	ch <- constMetric(c.calls, prometheus.CounterValue, float64(st.Dropped), "dropped")
	ch <- constMetric(c.elided, prometheus.CounterValue, float64(st.Elided))
	ch <- constMetric(c.bytes, prometheus.CounterValue, float64(st.Bytes))
	ch <- constMetric(c.files, prometheus.CounterValue, float64(st.FilesStarted))
	ch <- constMetric(c.errors, prometheus.CounterValue, float64(st.WriteErrors))
}
