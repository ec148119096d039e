package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/hmsproxy/hmsproxy/trace"
)

// newRecorder makes the recorder of client calls when record names a
// file, and starts it when recording.at_start says so; it is closed
// after the proxy, so that the calls the shutdown drains are written.
func (n *node) newRecorder() error {
	cfg := n.cfg
	if cfg.Record == "" {
		return nil
	}
	redact, err := trace.ParseRedaction(cfg.Recording.Redact)
	if err != nil {
		return err
	}
	// Said at start, not found by the first write hours later.
	if fi, err := os.Stat(filepath.Dir(cfg.Record)); err != nil || !fi.IsDir() {
		return fmt.Errorf("record %s: its directory is not there: %v", cfg.Record, err)
	}
	rec, err := trace.New(trace.Config{Path: cfg.Record, FileBytes: cfg.Recording.FileBytes, MaxBytes: cfg.Recording.MaxBytes,
		BufferBytes: cfg.Recording.BufferBytes, Redact: redact, Key: []byte(cfg.Recording.RedactKey),
		Logger: n.log.With("component", "recorder")})
	if err != nil {
		return err
	}
	n.recorder = rec
	n.onClose(rec.Close)
	if redact == trace.RedactOff {
		n.log.Warn("recording client calls unredacted: the trace holds every name clients ask for; keep it as you keep the metastore's data",
			"path", cfg.Record)
	}
	if cfg.Recording.AtStart {
		return rec.Start(0)
	}
	return nil
}
