package sasl

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"
)

// MechanismDigest is the SASL mechanism of Hadoop delegation tokens.
const MechanismDigest = "DIGEST-MD5"

// Token is a Hadoop delegation token as a metastore's
// get_delegation_token returns it (Token.encodeToUrlString).
type Token struct {
	Identifier []byte
	Password   []byte
	Kind       string
	Service    string
}

// ErrToken: a delegation token string that does not parse.
var ErrToken = errors.New("sasl: malformed delegation token")

// ParseToken decodes a token's URL-safe base64 form: the Writable fields
// identifier, password (each a VInt length and bytes), kind and service
// (Hadoop Text).
func ParseToken(s string) (Token, error) {
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		return Token{}, fmt.Errorf("%w: %v", ErrToken, err)
	}
	r := &vintReader{b: raw}
	var t Token
	t.Identifier = r.bytes()
	t.Password = r.bytes()
	t.Kind = string(r.bytes())
	t.Service = string(r.bytes())
	if r.err != nil {
		return Token{}, r.err
	}
	if len(t.Identifier) == 0 || len(t.Password) == 0 {
		return Token{}, fmt.Errorf("%w: empty identifier or password", ErrToken)
	}
	return t, nil
}

// vintReader reads Hadoop WritableUtils VInt-prefixed byte strings.
type vintReader struct {
	b   []byte
	err error
}

func (r *vintReader) bytes() []byte {
	n := r.vint()
	if r.err != nil {
		return nil
	}
	if n < 0 || n > int64(len(r.b)) {
		r.err = fmt.Errorf("%w: field of %d bytes with %d left", ErrToken, n, len(r.b))
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *vintReader) vint() int64 {
	if len(r.b) == 0 {
		r.err = fmt.Errorf("%w: truncated", ErrToken)
		return 0
	}
	first := int8(r.b[0])
	r.b = r.b[1:]
	if first >= -112 {
		return int64(first)
	}
	n := -112 - int(first) // bytes that follow, for positive values
	neg := first < -120
	if neg {
		n = -120 - int(first)
	}
	if n > 8 || len(r.b) < n {
		r.err = fmt.Errorf("%w: bad VInt", ErrToken)
		return 0
	}
	var v int64
	for _, c := range r.b[:n] {
		v = v<<8 | int64(c)
	}
	r.b = r.b[n:]
	if neg {
		v = ^v
	}
	return v
}

// digestURI is what Hive's DIGEST-MD5 server expects: Thrift's SASL
// server definition has no protocol (Java prints null) and the server
// name "default" (Hadoop's SaslRpcServer.SASL_DEFAULT_REALM).
const digestURI = "null/default"

// DigestHandshake authenticates conn with a delegation token (RFC 2831
// DIGEST-MD5, QOP auth), as Hive clients holding a token do. The metastore
// then acts as the token's owner. On success conn carries framed Thrift
// messages from the next byte on.
func DigestHandshake(ctx context.Context, conn net.Conn, tok Token) error {
	stop := withDeadline(ctx, conn)
	err := digestHandshake(conn, tok)
	stop()
	if err != nil {
		return ctxErr(ctx, fmt.Errorf("sasl: token handshake at %s: %w", conn.RemoteAddr(), err))
	}
	return nil
}

func digestHandshake(conn net.Conn, tok Token) error {
	if err := writeMessage(conn, StatusStart, []byte(MechanismDigest)); err != nil {
		return err
	}
	if err := writeMessage(conn, StatusOK, nil); err != nil { // no initial response
		return err
	}
	_, ch, err := expect(conn, StatusOK)
	if err != nil {
		return err
	}
	d, err := parseDirectives(ch)
	if err != nil {
		return err
	}
	if !strings.Contains(","+d["qop"]+",", ",auth,") && d["qop"] != "" {
		return fmt.Errorf("%w: the server offers qop %q; only auth is supported", ErrQOP, d["qop"])
	}
	nonce := d["nonce"]
	if nonce == "" {
		return fmt.Errorf("%w: DIGEST-MD5 challenge without a nonce", ErrProtocol)
	}
	realm := d["realm"]
	cn := make([]byte, 16)
	if _, err := rand.Read(cn); err != nil {
		return err
	}
	cnonce := base64.StdEncoding.EncodeToString(cn)
	user := base64.StdEncoding.EncodeToString(tok.Identifier)
	pass := base64.StdEncoding.EncodeToString(tok.Password)
	const nc = "00000001"
	ha1 := digestHA1(user, realm, pass, nonce, cnonce)
	resp := digestKD(ha1, nonce, nc, cnonce, "AUTHENTICATE:"+digestURI)
	var b strings.Builder
	b.WriteString(`charset=utf-8,username="` + user + `"`)
	if realm != "" {
		b.WriteString(`,realm="` + realm + `"`)
	}
	b.WriteString(`,nonce="` + nonce + `",nc=` + nc + `,cnonce="` + cnonce + `",digest-uri="` + digestURI +
		`",maxbuf=65536,response=` + resp + `,qop=auth`)
	if err := writeMessage(conn, StatusOK, []byte(b.String())); err != nil {
		return err
	}
	st, fin, err := expect(conn, StatusOK, StatusComplete)
	if err != nil {
		return err
	}
	fd, err := parseDirectives(fin)
	if err != nil {
		return err
	}
	if want := digestKD(ha1, nonce, nc, cnonce, ":"+digestURI); fd["rspauth"] != want {
		return fmt.Errorf("%w: the server's DIGEST-MD5 rspauth does not prove it knows the token", ErrAuthentication)
	}
	if st == StatusOK {
		// the server wants our (empty) acknowledgement before COMPLETE
		if err := writeMessage(conn, StatusComplete, nil); err != nil {
			return err
		}
		_, _, err = expect(conn, StatusComplete)
	}
	return err
}

// digestHA1 is H(A1) for qop auth without an authorization id.
func digestHA1(user, realm, pass, nonce, cnonce string) []byte {
	inner := md5.Sum([]byte(user + ":" + realm + ":" + pass))
	a1 := append(inner[:], []byte(":"+nonce+":"+cnonce)...)
	h := md5.Sum(a1)
	return h[:]
}

// digestKD computes the response value for a2 (RFC 2831 §2.1.2.1).
func digestKD(ha1 []byte, nonce, nc, cnonce, a2 string) string {
	ha2 := md5.Sum([]byte(a2))
	kd := md5.Sum([]byte(hex.EncodeToString(ha1) + ":" + nonce + ":" + nc + ":" + cnonce + ":auth:" + hex.EncodeToString(ha2[:])))
	return hex.EncodeToString(kd[:])
}

// parseDirectives splits a DIGEST-MD5 challenge into its key=value pairs;
// quoted values may contain commas and backslash escapes.
func parseDirectives(b []byte) (map[string]string, error) {
	m := map[string]string{}
	s := string(bytes.TrimSpace(b))
	for len(s) > 0 {
		eq := strings.IndexByte(s, '=')
		if eq <= 0 {
			return nil, fmt.Errorf("%w: DIGEST-MD5 directive without a value: %q", ErrProtocol, printable([]byte(s)))
		}
		key := strings.ToLower(strings.TrimSpace(s[:eq]))
		s = s[eq+1:]
		var val string
		if strings.HasPrefix(s, `"`) {
			var v strings.Builder
			i := 1
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				v.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("%w: unterminated quoted DIGEST-MD5 value", ErrProtocol)
			}
			val, s = v.String(), s[i+1:]
		} else {
			end := strings.IndexByte(s, ',')
			if end < 0 {
				end = len(s)
			}
			val, s = strings.TrimSpace(s[:end]), s[end:]
		}
		if _, dup := m[key]; !dup {
			m[key] = val
		}
		s = strings.TrimLeft(s, " ,")
	}
	return m, nil
}
