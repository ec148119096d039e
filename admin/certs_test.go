package admin

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/auth/certs"
	"github.com/hmsproxy/hmsproxy/auth/certs/certstest"
	"github.com/hmsproxy/hmsproxy/cache"
	"github.com/hmsproxy/hmsproxy/internal/testenv/proxytest"
	"github.com/hmsproxy/hmsproxy/internal/testenv/syncbuf"
)

type nopFlusher struct{}

func (nopFlusher) Flush(context.Context, []cache.Entity) error { return nil }

type fixedCerts []certs.Stats

func (f fixedCerts) CertStats() []certs.Stats { return f }

// records are the JSON log records written to logs.
func records(t *testing.T, logs *syncbuf.Buffer) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// TestAdminTLSLogsCaller runs the admin port over mutual TLS: flushes are
// logged with the caller's address, how it authenticated and its
// certificate's subject, never the token, and refused requests are
// logged too.
func TestAdminTLSLogsCaller(t *testing.T) {
	const token = "s3cret-token-value"
	serverCA := certstest.NewAuthority(t, "server CA")
	clientCA := certstest.NewAuthority(t, "client CA")
	c, k := serverCA.Issue(t, certstest.ECDSA, 9, "admin", time.Now().Add(time.Hour))
	f := certstest.WriteFiles(t, t.TempDir(), c, k, clientCA.PEM, 0)
	rl, err := certs.New(certs.Config{Name: "admin.tls", Cert: f.Cert, Key: f.Key, CA: f.CA, Interval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer rl.Close()

	var logs syncbuf.Buffer
	expiry := time.Unix(2000000000, 0)
	s, err := New(Config{Logger: slog.New(slog.NewJSONHandler(&logs, nil)), Token: token, Flusher: nopFlusher{},
		Certs: fixedCerts{{Name: "tls", Reloads: 2, Failures: 1, HandshakeFailures: 3, NotAfter: expiry, Serial: big.NewInt(1)}}})
	if err != nil {
		t.Fatal(err)
	}
	inner := proxytest.Listen(t)
	ln, err := rl.HTTPListener(inner)
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	defer s.Shutdown(context.Background())

	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: serverCA.Pool(), Certificates: []tls.Certificate{clientCA.KeyPair(t, 5, "ops-alice")}}}}
	base := "https://" + inner.Addr().String()
	post := func(auth string) int {
		req, _ := http.NewRequest("POST", base+"/cache/flush/sales/orders", nil)
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(token); code != http.StatusOK {
		t.Fatalf("flush with the token: got %d; want 200", code)
	}
	if code := post("wrong-token"); code != http.StatusUnauthorized {
		t.Fatalf("flush with a wrong token: got %d; want 401", code)
	}

	var flushed, refused map[string]any
	for _, r := range records(t, &logs) {
		switch r["msg"] {
		case "cache flushed":
			flushed = r
		case "admin request refused: no valid bearer token":
			refused = r
		}
	}
	for _, tc := range []struct {
		name string
		rec  map[string]any
		auth string
	}{{"flushed", flushed, "bearer-token"}, {"refused", refused, "refused"}} {
		if tc.rec == nil {
			t.Fatalf("no %s log record in %s", tc.name, logs.String())
		}
		if rem, _ := tc.rec["remote"].(string); !strings.HasPrefix(rem, "127.0.0.1:") {
			t.Errorf("%s: remote %q; want the caller's 127.0.0.1:port", tc.name, rem)
		}
		if tc.rec["auth"] != tc.auth || tc.rec["client_cert"] != "CN=ops-alice" {
			t.Errorf("%s: auth %v, client_cert %v; want %s, CN=ops-alice", tc.name, tc.rec["auth"], tc.rec["client_cert"], tc.auth)
		}
	}
	if strings.Contains(logs.String(), token) || strings.Contains(logs.String(), "wrong-token") {
		t.Fatalf("a token was logged: %s", logs.String())
	}

	// A client without a certificate is refused at the handshake.
	bare := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: serverCA.Pool()}}}
	if resp, err := bare.Get(base + "/healthz"); err == nil {
		resp.Body.Close()
		t.Fatal("admin port over mutual TLS answered a client without a certificate")
	}

	resp, err := hc.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`hmsproxy_tls_reloads_total{endpoint="tls",result="success"} 2`,
		`hmsproxy_tls_reloads_total{endpoint="tls",result="failure"} 1`,
		`hmsproxy_tls_certificate_expiry_timestamp_seconds{endpoint="tls"} 2e+09`,
		`hmsproxy_tls_handshake_failures_total{endpoint="tls"} 3`,
	} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
