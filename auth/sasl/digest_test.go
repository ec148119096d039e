package sasl

import (
	"bytes"
	"encoding/base64"
	"errors"
	"testing"
)

// The worked example of RFC 2831 §4 (IMAP, qop auth).
func TestDigestRFC2831Example(t *testing.T) {
	ha1 := digestHA1("chris", "elwood.innosoft.com", "secret", "OA6MG9tEQGm2hh", "OA6MHXh6VqTrRk")
	if got, want := digestKD(ha1, "OA6MG9tEQGm2hh", "00000001", "OA6MHXh6VqTrRk", "AUTHENTICATE:imap/elwood.innosoft.com"),
		"d388dad90d4bbd760a152321f2143af7"; got != want {
		t.Errorf("response: got %s; want %s", got, want)
	}
	if got, want := digestKD(ha1, "OA6MG9tEQGm2hh", "00000001", "OA6MHXh6VqTrRk", ":imap/elwood.innosoft.com"),
		"ea40f60335c427b5527b84dbabcdfffd"; got != want {
		t.Errorf("rspauth: got %s; want %s", got, want)
	}
}

func TestParseDirectives(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     map[string]string
	}{
		{"java challenge", `realm="default",nonce="a,b\"c",qop="auth",charset=utf-8,algorithm=md5-sess`,
			map[string]string{"realm": "default", "nonce": `a,b"c`, "qop": "auth", "charset": "utf-8", "algorithm": "md5-sess"}},
		{"rspauth", `rspauth=ea40f60335c427b5527b84dbabcdfffd`, map[string]string{"rspauth": "ea40f60335c427b5527b84dbabcdfffd"}},
		{"spaces and first wins", ` a = 1 , a=2,B="x"`, map[string]string{"a": "1", "b": "x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseDirectives([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s: got %q; want %q", k, got[k], v)
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("got %v; want %v", got, tc.want)
			}
		})
	}
	for _, bad := range []string{`novalue`, `nonce="open`} {
		if _, err := parseDirectives([]byte(bad)); !errors.Is(err, ErrProtocol) {
			t.Errorf("%q: got %v; want ErrProtocol", bad, err)
		}
	}
}

// vint encodes as Hadoop's WritableUtils.writeVLong.
func vint(i int64) []byte {
	if i >= -112 && i <= 127 {
		return []byte{byte(int8(i))}
	}
	l := int8(-112)
	if i < 0 {
		i ^= -1
		l = -120
	}
	var tmp []byte
	for t := i; t != 0; t >>= 8 {
		tmp = append([]byte{byte(t)}, tmp...)
		l--
	}
	return append([]byte{byte(l)}, tmp...)
}

func tokenString(fields ...[]byte) string {
	var b bytes.Buffer
	for _, f := range fields {
		b.Write(vint(int64(len(f))))
		b.Write(f)
	}
	return base64.RawURLEncoding.EncodeToString(b.Bytes())
}

func TestParseToken(t *testing.T) {
	id := bytes.Repeat([]byte{0xAB}, 300) // a two-byte VInt length
	s := tokenString(id, []byte("pw"), []byte("HIVE_DELEGATION_TOKEN"), nil)
	tok, err := ParseToken(s)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(tok.Identifier, id) || string(tok.Password) != "pw" || tok.Kind != "HIVE_DELEGATION_TOKEN" || tok.Service != "" {
		t.Fatalf("got %+v", tok)
	}
	for name, bad := range map[string]string{
		"not base64":     "!!!",
		"truncated":      tokenString(id)[:20],
		"no password":    tokenString(id, nil, nil, nil),
		"length too big": base64.RawURLEncoding.EncodeToString(append(vint(1000), 1, 2, 3)),
	} {
		if _, err := ParseToken(bad); !errors.Is(err, ErrToken) {
			t.Errorf("%s: got %v; want ErrToken", name, err)
		}
	}
}

func FuzzParseToken(f *testing.F) {
	f.Add(tokenString([]byte("id"), []byte("pw"), []byte("K"), []byte("S")))
	f.Add(tokenString(bytes.Repeat([]byte{1}, 70000), []byte("pw"), nil, nil))
	f.Add("gIA")
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := ParseToken(s)
		if err == nil && (len(tok.Identifier) == 0 || len(tok.Password) == 0) {
			t.Fatalf("accepted a token without identifier or password: %q", s)
		}
	})
}

func FuzzParseDirectives(f *testing.F) {
	f.Add([]byte(`realm="default",nonce="x",qop="auth",charset=utf-8,algorithm=md5-sess`))
	f.Add([]byte(`a="\"`))
	f.Fuzz(func(t *testing.T, b []byte) { _, _ = parseDirectives(b) })
}

// FuzzReadMessage: the handshake frame reader never allocates beyond its
// limit and never accepts an unknown status.
func FuzzReadMessage(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 6, 'G', 'S', 'S', 'A', 'P', 'I'})
	f.Add([]byte{5, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		st, p, err := readMessage(bytes.NewReader(b))
		if err == nil && (st < StatusStart || st > StatusComplete || len(p) > maxMessage) {
			t.Fatalf("accepted status %d with %d bytes", st, len(p))
		}
	})
}
