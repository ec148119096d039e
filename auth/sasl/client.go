package sasl

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/jcmturner/gokrb5/v8/client"
	"github.com/jcmturner/gokrb5/v8/config"
	"github.com/jcmturner/gokrb5/v8/crypto"
	"github.com/jcmturner/gokrb5/v8/gssapi"
	"github.com/jcmturner/gokrb5/v8/iana/flags"
	"github.com/jcmturner/gokrb5/v8/iana/keyusage"
	"github.com/jcmturner/gokrb5/v8/keytab"
	"github.com/jcmturner/gokrb5/v8/messages"
	"github.com/jcmturner/gokrb5/v8/spnego"
	"github.com/jcmturner/gokrb5/v8/types"
)

// ClientConfig configures the initiating end.
type ClientConfig struct {
	// Principal is our own principal, "hmsproxy/proxy.example.com@EXAMPLE.COM".
	// Required; its key must be in Keytab. Without a realm, krb5.conf's
	// default_realm.
	Principal string
	// Keytab holds Principal's keys. Required.
	Keytab *keytab.Keytab
	// Krb5Conf is the parsed krb5.conf naming the KDCs. Required.
	Krb5Conf *config.Config
}

// Client authenticates to GSSAPI services with one principal, keeping its
// ticket-granting ticket (renewed from the keytab by gokrb5) for all
// connections. Safe for concurrent use; Close ends the renewal.
type Client struct {
	cl *client.Client
	// ticket fetches a service ticket; a seam so that tests can present
	// a ticket past its end time.
	ticket func(spn string) (messages.Ticket, types.EncryptionKey, error)
}

// NewClient logs in to the KDC.
func NewClient(cfg ClientConfig) (*Client, error) {
	if cfg.Keytab == nil || cfg.Krb5Conf == nil {
		return nil, errors.New("sasl: client keytab and krb5.conf are required")
	}
	name, realm, err := ParsePrincipal(cfg.Principal)
	if err != nil {
		return nil, err
	}
	if realm == "" {
		realm = cfg.Krb5Conf.LibDefaults.DefaultRealm
	}
	cl := client.NewWithKeytab(name.PrincipalNameString(), realm, cfg.Keytab, cfg.Krb5Conf,
		client.DisablePAFXFAST(true))
	if err := cl.Login(); err != nil {
		return nil, fmt.Errorf("sasl: log in as %s@%s: %w", name.PrincipalNameString(), realm, err)
	}
	return &Client{cl: cl, ticket: cl.GetServiceTicket}, nil
}

// Close stops the ticket renewal. Safe to call twice.
func (c *Client) Close() { c.cl.Destroy() }

// Handshake runs the client side of the handshake on conn to the service
// principal service ("hive/metastore.example.com@EXAMPLE.COM"; the realm
// may be left out). authzID, when not empty, asks the server to act as that
// identity; metastores refuse it on GSSAPI unless it equals our principal.
// On success conn carries framed Thrift messages from the next byte on.
func (c *Client) Handshake(ctx context.Context, conn net.Conn, service, authzID string) error {
	stop := withDeadline(ctx, conn)
	err := c.handshake(conn, service, authzID)
	stop()
	if err != nil {
		return ctxErr(ctx, fmt.Errorf("sasl: handshake with %s at %s: %w", service, conn.RemoteAddr(), err))
	}
	return nil
}

func (c *Client) handshake(conn net.Conn, service, authzID string) error {
	spn, _, _ := strings.Cut(service, "@")
	tkt, key, err := c.ticket(spn)
	if err != nil {
		return fmt.Errorf("%w: service ticket for %s: %v", ErrAuthentication, service, err)
	}
	tok, err := spnego.NewKRB5TokenAPREQ(c.cl, tkt, key,
		[]int{gssapi.ContextFlagMutual, gssapi.ContextFlagInteg, gssapi.ContextFlagConf},
		[]int{flags.APOptionMutualRequired})
	if err != nil {
		return fmt.Errorf("sasl: AP-REQ: %w", err)
	}
	b, err := tok.Marshal()
	if err != nil {
		return fmt.Errorf("sasl: AP-REQ: %w", err)
	}
	if err := writeMessage(conn, StatusStart, []byte(Mechanism)); err != nil {
		return err
	}
	rep, err := exchange(conn, StatusOK, b)
	if err != nil {
		return err
	}
	// gokrb5 keeps only the encrypted authenticator; its time and sequence
	// number are needed to check the AP-REP and number our tokens
	if err := tok.APReq.DecryptAuthenticator(key); err != nil {
		return fmt.Errorf("sasl: own authenticator: %w", err)
	}
	g := &gssContext{key: key, ourSeq: uint64(tok.APReq.Authenticator.SeqNumber)}
	if err := g.acceptAPRep(rep, key, tok.APReq.Authenticator); err != nil {
		return err
	}
	challenge, err := exchange(conn, StatusOK, nil)
	if err != nil {
		return err
	}
	offer, err := g.unwrap(challenge, true)
	if err != nil {
		return err
	}
	if len(offer) < 4 {
		return fmt.Errorf("%w: security-layer offer of %d bytes", ErrProtocol, len(offer))
	}
	if offer[0]&layerNone == 0 {
		return fmt.Errorf("%w: the server offers only %s; set hadoop.rpc.protection=authentication on it",
			ErrQOP, layerNames(offer[0]))
	}
	reply, err := g.wrap(append([]byte{layerNone, 0, 0, 0}, authzID...), false)
	if err != nil {
		return err
	}
	_, err = exchange(conn, StatusComplete, reply)
	return err
}

// exchange is one step of the client's side of the handshake: it sends
// payload under status st and reads the server's answer, which must
// carry st too.
func exchange(conn net.Conn, st Status, payload []byte) ([]byte, error) {
	if err := writeMessage(conn, st, payload); err != nil {
		return nil, err
	}
	_, b, err := expect(conn, st)
	return b, err
}

// acceptAPRep checks the server's mutual-authentication reply and adopts
// the acceptor subkey when it sent one (Java acceptors do).
func (g *gssContext) acceptAPRep(tok []byte, sessionKey types.EncryptionKey, auth types.Authenticator) error {
	var kt spnego.KRB5Token
	if err := kt.Unmarshal(tok); err != nil {
		return fmt.Errorf("%w: mutual-authentication token: %v", ErrProtocol, err)
	}
	if kt.IsKRBError() {
		return fmt.Errorf("%w: server: %s", ErrAuthentication, strings.TrimSpace(kt.KRBError.Error()))
	}
	if !kt.IsAPRep() {
		return fmt.Errorf("%w: mutual-authentication token is not an AP-REP", ErrProtocol)
	}
	plain, err := crypto.DecryptEncPart(kt.APRep.EncPart, sessionKey, keyusage.AP_REP_ENCPART)
	if err != nil {
		return fmt.Errorf("%w: AP-REP does not decrypt with our session key: %v", ErrAuthentication, err)
	}
	var part messages.EncAPRepPart
	if err := part.Unmarshal(plain); err != nil {
		return fmt.Errorf("%w: AP-REP: %v", ErrProtocol, err)
	}
	if !part.CTime.Equal(auth.CTime) || part.Cusec != auth.Cusec {
		return fmt.Errorf("%w: AP-REP does not echo our authenticator", ErrAuthentication)
	}
	if part.Subkey.KeyType != 0 {
		g.key = part.Subkey
		g.acceptorSubkey = true
	}
	return nil
}

func layerNames(b byte) string {
	var s []string
	if b&layerIntegrity != 0 {
		s = append(s, "integrity (auth-int)")
	}
	if b&layerPrivacy != 0 {
		s = append(s, "privacy (auth-conf)")
	}
	if len(s) == 0 {
		return "nothing"
	}
	return strings.Join(s, " and ")
}
