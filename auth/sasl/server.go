package sasl

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/jcmturner/gokrb5/v8/gssapi"
	"github.com/jcmturner/gokrb5/v8/iana/errorcode"
	"github.com/jcmturner/gokrb5/v8/keytab"
	"github.com/jcmturner/gokrb5/v8/messages"
	"github.com/jcmturner/gokrb5/v8/service"
	"github.com/jcmturner/gokrb5/v8/spnego"
	"github.com/jcmturner/gokrb5/v8/types"
)

// ServerConfig configures the accepting end.
type ServerConfig struct {
	// Principal is the service principal clients ask tickets for, such as
	// "hmsproxy/proxy.example.com@EXAMPLE.COM". Required; its key must be in
	// Keytab. Tickets for any other principal are refused.
	Principal string
	// Keytab holds the service principal's keys. Required.
	Keytab *keytab.Keytab
	// MaxClockSkew is the tolerated difference between the client's clock
	// and ours, also applied to ticket start and end times. Default 5m, the
	// Kerberos default.
	MaxClockSkew time.Duration
	// ShortName maps an authenticated principal, as its ticket names it
	// (name components and realm), to the identity the connection gets.
	// Nil: Hadoop's DEFAULT rule, the first component for a principal of
	// the service's realm and the whole principal for any other. An error
	// or an empty name refuses the handshake.
	ShortName func(components []string, realm string) (string, error)
}

// Server accepts GSSAPI handshakes. Safe for concurrent use.
type Server struct {
	principal types.PrincipalName
	realm     string
	full      string
	settings  *service.Settings
	shortName func(components []string, realm string) (string, error)
}

// Peer is an authenticated client.
type Peer struct {
	// Principal is the client's full principal, "alice@EXAMPLE.COM", as
	// the KDC wrote it into the client's service ticket.
	Principal string
	// User is the identity a metastore would give the connection:
	// Principal mapped by ServerConfig.ShortName.
	User string
	// Expires is the end time of the client's service ticket.
	Expires time.Time
}

// NewServer validates cfg.
func NewServer(cfg ServerConfig) (*Server, error) {
	if cfg.Keytab == nil {
		return nil, errors.New("sasl: server keytab is required")
	}
	name, realm, err := ParsePrincipal(cfg.Principal)
	if err != nil {
		return nil, err
	}
	if realm == "" {
		return nil, fmt.Errorf("sasl: service principal %q has no realm", cfg.Principal)
	}
	if _, _, err := cfg.Keytab.GetEncryptionKey(name, realm, 0, 18); err != nil {
		if _, _, err2 := cfg.Keytab.GetEncryptionKey(name, realm, 0, 17); err2 != nil {
			return nil, fmt.Errorf("sasl: keytab has no AES key for %s: %w", cfg.Principal, err)
		}
	}
	skew := cfg.MaxClockSkew
	if skew <= 0 {
		skew = 5 * time.Minute
	}
	s := &Server{principal: name, realm: realm, full: cfg.Principal, shortName: cfg.ShortName}
	if s.shortName == nil {
		s.shortName = s.defaultShortName
	}
	s.settings = service.NewSettings(cfg.Keytab,
		service.MaxClockSkew(skew),
		service.KeytabPrincipal(name.PrincipalNameString()),
		service.DecodePAC(false))
	return s, nil
}

// defaultShortName is Hadoop's DEFAULT auth_to_local rule, with every
// other realm kept whole.
func (s *Server) defaultShortName(components []string, realm string) (string, error) {
	if realm == s.realm && len(components) > 0 {
		return components[0], nil
	}
	return strings.Join(components, "/") + "@" + realm, nil
}

// ParsePrincipal splits "primary/instance@REALM" into a name and a realm
// (empty when absent).
func ParsePrincipal(p string) (types.PrincipalName, string, error) {
	if p == "" {
		return types.PrincipalName{}, "", errors.New("sasl: empty principal")
	}
	name, realm, _ := strings.Cut(p, "@")
	if name == "" {
		return types.PrincipalName{}, "", fmt.Errorf("sasl: principal %q has no name", p)
	}
	// NT_PRINCIPAL (1) for users, NT_SRV_HST (3) for "service/host"
	nt := int32(1)
	if strings.Contains(name, "/") {
		nt = 3
	}
	return types.NewPrincipalName(nt, name), realm, nil
}

// Accept runs the server side of the handshake on c. On success c carries
// framed Thrift messages from the next byte on. On failure the client has
// been sent an ERROR or BAD message saying why (when the connection still
// works) and the caller should close c.
func (s *Server) Accept(ctx context.Context, c net.Conn) (Peer, error) {
	stop := withDeadline(ctx, c)
	p, err := s.accept(c)
	stop()
	if err != nil {
		return Peer{}, ctxErr(ctx, fmt.Errorf("sasl: accept from %s: %w", c.RemoteAddr(), err))
	}
	return p, nil
}

func (s *Server) accept(c net.Conn) (Peer, error) {
	_, mech, err := expect(c, StatusStart)
	if err != nil {
		return Peer{}, err
	}
	if string(mech) != Mechanism {
		_ = writeMessage(c, StatusBad, []byte("unsupported mechanism "+printable(mech)+"; this proxy accepts only GSSAPI (Kerberos)"))
		return Peer{}, fmt.Errorf("%w: %q", ErrMechanism, printable(mech))
	}
	_, tok, err := expect(c, StatusOK, StatusComplete)
	if err != nil {
		return Peer{}, err
	}
	req, err := s.verify(tok)
	if err != nil {
		_ = writeMessage(c, StatusError, []byte(err.Error()))
		return Peer{}, err
	}
	g := &gssContext{key: req.Ticket.DecryptedEncPart.Key}
	if req.Authenticator.SubKey.KeyType != 0 {
		g.key = req.Authenticator.SubKey
	}
	seq, err := randomSeq()
	if err != nil {
		return Peer{}, err
	}
	g.ourSeq = uint64(seq)
	if authenticatorFlags(req.Authenticator)&gssapi.ContextFlagMutual != 0 {
		rep, err := marshalAPRep(req, seq)
		if err != nil {
			_ = writeMessage(c, StatusError, []byte(err.Error()))
			return Peer{}, err
		}
		if err := writeMessage(c, StatusOK, rep); err != nil {
			return Peer{}, err
		}
		// the client's GSS context is now established and it says so
		// with an empty token (RFC 4752 §3.1)
		if _, _, err := expect(c, StatusOK); err != nil {
			return Peer{}, err
		}
	}
	// offer only "no security layer"; the maximum buffer is meaningless then
	challenge, err := g.wrap([]byte{layerNone, 0x01, 0x00, 0x00}, true)
	if err != nil {
		return Peer{}, err
	}
	if err := writeMessage(c, StatusOK, challenge); err != nil {
		return Peer{}, err
	}
	_, resp, err := expect(c, StatusOK, StatusComplete)
	if err != nil {
		return Peer{}, err
	}
	choice, err := g.unwrap(resp, false)
	if err != nil {
		_ = writeMessage(c, StatusError, []byte(err.Error()))
		return Peer{}, err
	}
	if len(choice) < 4 || choice[0] != layerNone {
		_ = writeMessage(c, StatusError, []byte("only quality of protection auth is supported"))
		return Peer{}, fmt.Errorf("%w: client chose layer %v", ErrQOP, choice[:min(1, len(choice))])
	}
	// Who the client is comes from the ticket, which the KDC wrote and
	// encrypted for us; verify made sure the authenticator agrees.
	enc := req.Ticket.DecryptedEncPart
	client := enc.CName.PrincipalNameString() + "@" + enc.CRealm
	user, err := s.shortName(enc.CName.NameString, enc.CRealm)
	if err == nil && user == "" {
		err = errors.New("the mapping gives an empty name")
	}
	if err != nil {
		err = fmt.Errorf("%w: no identity for %s: %v", ErrAuthentication, client, err)
		_ = writeMessage(c, StatusError, []byte(err.Error()))
		return Peer{}, err
	}
	if authz := string(choice[4:]); authz != "" && authz != client {
		_ = writeMessage(c, StatusError, []byte(ErrAuthzID.Error()))
		return Peer{}, fmt.Errorf("%w: %s asked to act as %q", ErrAuthzID, client, printable(choice[4:]))
	}
	if err := writeMessage(c, StatusComplete, nil); err != nil {
		return Peer{}, err
	}
	return Peer{Principal: client, User: user, Expires: enc.EndTime}, nil
}

// verify checks the client's AP-REQ against our keytab.
func (s *Server) verify(tok []byte) (*messages.APReq, error) {
	var kt spnego.KRB5Token
	if err := kt.Unmarshal(tok); err != nil {
		return nil, fmt.Errorf("%w: initial token: %v", ErrProtocol, err)
	}
	if !kt.IsAPReq() {
		return nil, fmt.Errorf("%w: initial token is not an AP-REQ", ErrProtocol)
	}
	req := kt.APReq
	if !req.Ticket.SName.Equal(s.principal) || req.Ticket.Realm != s.realm {
		return nil, fmt.Errorf("%w: ticket is for %s@%s, not for this service %s", ErrAuthentication,
			req.Ticket.SName.PrincipalNameString(), req.Ticket.Realm, s.full)
	}
	ok, _, err := service.VerifyAPREQ(&req, s.settings)
	if err != nil || !ok {
		var ke messages.KRBError
		if errors.As(err, &ke) {
			if ke.ErrorCode == errorcode.KRB_AP_ERR_BADMATCH {
				// gokrb5 compares the names (not the realms): the
				// ticket and the authenticator are both decrypted
				return nil, mismatch(&req)
			}
			return nil, fmt.Errorf("%w: %s", ErrAuthentication, strings.TrimSpace(ke.EText))
		}
		return nil, fmt.Errorf("%w: %v", ErrAuthentication, err)
	}
	if err := mismatch(&req); err != nil {
		return nil, err
	}
	return &req, nil
}

// mismatch refuses an authenticator that names another client principal
// than the ticket (RFC 4120 §3.2.3): the client wrote the one, the KDC the
// other.
func mismatch(req *messages.APReq) error {
	a, t := req.Authenticator, req.Ticket.DecryptedEncPart
	if a.CName.Equal(t.CName) && a.CRealm == t.CRealm {
		return nil
	}
	return fmt.Errorf("%w: %w: the authenticator names %s, the ticket was issued to %s@%s", ErrAuthentication, ErrPrincipalMismatch,
		printable([]byte(a.CName.PrincipalNameString()+"@"+a.CRealm)), t.CName.PrincipalNameString(), t.CRealm)
}
