package admin

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/trace"
)

func TestRecordEndpoint(t *testing.T) {
	path := filepath.Join(t.TempDir(), "calls.trace")
	rec, err := trace.New(trace.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	base := serve(t, Config{Recording: rec, Token: "s3cret"})
	const auth = "Bearer s3cret"

	if r := do(t, "POST", base+"/record", ""); r.code != http.StatusUnauthorized || rec.Recording() {
		t.Fatalf("POST /record without the token: %d, recording %v; want 401, not recording", r.code, rec.Recording())
	}
	for _, body := range []string{`{"path": "/etc/passwd"}`, `{"for": "-1h"}`, `{"for": "9000h"}`, `not json`} {
		if r := request(t, "POST", base+"/record", auth, strings.NewReader(body)); r.code != http.StatusBadRequest || rec.Recording() {
			t.Fatalf("POST /record %s: %d %s; want 400, not recording", body, r.code, r.body)
		}
	}
	r := request(t, "POST", base+"/record", auth, strings.NewReader(`{"for": "1h"}`))
	var st recordStatus
	if err := json.Unmarshal([]byte(r.body), &st); err != nil || r.code != http.StatusOK || !st.Recording || st.Until == nil || st.Path != path {
		t.Fatalf("POST /record: %d %s; want recording to %s for an hour", r.code, r.body, path)
	}
	c := trace.Call{Method: "get_table", Args: hmsreq.Args(hmsreq.Str(1, "db"), hmsreq.Str(2, "t"))}
	rec.Record(&c)
	if r := do(t, "DELETE", base+"/record", auth); r.code != http.StatusOK || rec.Recording() {
		t.Fatalf("DELETE /record: %d %s; want 200, stopped", r.code, r.body)
	}
	series, _ := scrape(t, base)
	if series[`hmsproxy_record_calls_total{result="written"}`] != 1 || series["hmsproxy_recording"] != 0 || series["hmsproxy_record_files_total"] != 1 {
		t.Fatalf("metrics %v; want one call written to one file, not recording", series)
	}
	l, err := trace.Load(path, 0)
	if err != nil || len(l.Calls) != 1 {
		t.Fatalf("trace: %v, %v; want the one call", l, err)
	}
}

func TestRecordEndpointWithoutRecorder(t *testing.T) {
	base := serve(t, Config{})
	if r := do(t, "POST", base+"/record", ""); r.code != http.StatusNotImplemented {
		t.Fatalf("POST /record with no recorder: %d; want 501", r.code)
	}
}
