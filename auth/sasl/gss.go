package sasl

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"math/big"
	"time"

	"github.com/jcmturner/gofork/encoding/asn1"
	"github.com/jcmturner/gokrb5/v8/asn1tools"
	"github.com/jcmturner/gokrb5/v8/crypto"
	"github.com/jcmturner/gokrb5/v8/gssapi"
	"github.com/jcmturner/gokrb5/v8/iana/asnAppTag"
	"github.com/jcmturner/gokrb5/v8/iana/keyusage"
	"github.com/jcmturner/gokrb5/v8/iana/msgtype"
	"github.com/jcmturner/gokrb5/v8/messages"
	"github.com/jcmturner/gokrb5/v8/types"
)

// RFC 4121 wrap-token flags.
const (
	flagSentByAcceptor = 0x01
	flagSealed         = 0x02
	flagAcceptorSubkey = 0x04
)

// The GSS-API context-establishment token ids of RFC 4121 §4.1.
var (
	tokAPReq = [2]byte{0x01, 0x00}
	tokAPRep = [2]byte{0x02, 0x00}
)

// gssContext is what both ends keep once the Kerberos exchange is done: the
// key protecting per-message tokens and the two sequence numbers.
type gssContext struct {
	key            types.EncryptionKey
	acceptorSubkey bool
	ourSeq         uint64
}

// randomSeq draws an initial sequence number the way MIT and Java do (30 bits).
func randomSeq() (int64, error) {
	n, err := rand.Int(rand.Reader, big.NewInt(1<<30))
	if err != nil {
		return 0, err
	}
	return n.Int64() + 1, nil // never 0: an optional ASN.1 0 would be left out
}

// encAPRepPart mirrors messages.EncAPRepPart without the subkey, for
// marshalling (gokrb5 only parses AP-REPs).
type encAPRepPart struct {
	CTime          time.Time `asn1:"generalized,explicit,tag:0"`
	Cusec          int       `asn1:"explicit,tag:1"`
	SequenceNumber int64     `asn1:"optional,explicit,tag:3"`
}

// marshalAPRep builds the acceptor's GSS-API token for mutual
// authentication: an AP-REP echoing the authenticator's time, encrypted in
// the ticket's session key (RFC 4120 §3.2.4).
func marshalAPRep(req *messages.APReq, seq int64) ([]byte, error) {
	part, err := asn1.Marshal(encAPRepPart{
		CTime:          req.Authenticator.CTime,
		Cusec:          req.Authenticator.Cusec,
		SequenceNumber: seq,
	})
	if err != nil {
		return nil, fmt.Errorf("sasl: marshal AP-REP part: %w", err)
	}
	part = asn1tools.AddASNAppTag(part, asnAppTag.EncAPRepPart)
	ed, err := crypto.GetEncryptedData(part, req.Ticket.DecryptedEncPart.Key, keyusage.AP_REP_ENCPART, 0)
	if err != nil {
		return nil, fmt.Errorf("sasl: encrypt AP-REP: %w", err)
	}
	rep, err := asn1.Marshal(messages.APRep{PVNO: 5, MsgType: msgtype.KRB_AP_REP, EncPart: ed})
	if err != nil {
		return nil, fmt.Errorf("sasl: marshal AP-REP: %w", err)
	}
	rep = asn1tools.AddASNAppTag(rep, asnAppTag.APREP)
	return gssFrame(tokAPRep, rep)
}

// gssFrame wraps a Kerberos message in the GSS-API initial-context framing
// (RFC 2743 §3.1): application tag 0, the Kerberos mechanism OID, token id.
func gssFrame(id [2]byte, msg []byte) ([]byte, error) {
	b, err := asn1.Marshal(gssapi.OIDKRB5.OID())
	if err != nil {
		return nil, fmt.Errorf("sasl: marshal mechanism OID: %w", err)
	}
	b = append(b, id[:]...)
	b = append(b, msg...)
	return asn1tools.AddASNAppTag(b, 0), nil
}

// wrap produces an RFC 4121 wrap token without confidentiality, as RFC 4752
// uses for its security-layer negotiation.
func (g *gssContext) wrap(payload []byte, acceptor bool) ([]byte, error) {
	et, err := crypto.GetEtype(g.key.KeyType)
	if err != nil {
		return nil, fmt.Errorf("sasl: wrap: %w", err)
	}
	wt := gssapi.WrapToken{
		EC:        uint16(et.GetHMACBitLength() / 8),
		SndSeqNum: g.ourSeq,
		Payload:   payload,
	}
	usage := uint32(keyusage.GSSAPI_INITIATOR_SEAL)
	if acceptor {
		wt.Flags |= flagSentByAcceptor
		usage = keyusage.GSSAPI_ACCEPTOR_SEAL
	}
	if g.acceptorSubkey {
		wt.Flags |= flagAcceptorSubkey
	}
	if err := wt.SetCheckSum(g.key, usage); err != nil {
		return nil, fmt.Errorf("sasl: wrap checksum: %w", err)
	}
	g.ourSeq++
	return wt.Marshal()
}

// unwrap verifies a peer's wrap token and returns its payload. Sealed
// (encrypted) tokens are refused: RFC 4752 negotiation never seals.
func (g *gssContext) unwrap(b []byte, fromAcceptor bool) ([]byte, error) {
	if len(b) >= gssapi.HdrLen {
		// undo a right rotation (RFC 4121 §4.2.5) so the checksum trails
		rrc := int(binary.BigEndian.Uint16(b[6:8]))
		if body := b[gssapi.HdrLen:]; rrc != 0 && len(body) > 0 {
			rrc %= len(body)
			rot := make([]byte, 0, len(b))
			rot = append(rot, b[:gssapi.HdrLen]...)
			rot = append(rot, body[rrc:]...)
			rot = append(rot, body[:rrc]...)
			binary.BigEndian.PutUint16(rot[6:8], 0)
			b = rot
		}
	}
	var wt gssapi.WrapToken
	if err := wt.Unmarshal(b, fromAcceptor); err != nil {
		return nil, fmt.Errorf("%w: wrap token: %v", ErrProtocol, err)
	}
	if wt.Flags&flagSealed != 0 {
		return nil, fmt.Errorf("%w: sealed wrap token in the negotiation", ErrProtocol)
	}
	usage := uint32(keyusage.GSSAPI_INITIATOR_SEAL)
	if fromAcceptor {
		usage = keyusage.GSSAPI_ACCEPTOR_SEAL
	}
	if ok, err := wt.Verify(g.key, usage); !ok {
		return nil, fmt.Errorf("%w: wrap token checksum: %v", ErrAuthentication, err)
	}
	return wt.Payload, nil
}

// authenticatorFlags returns the GSS-API context flags a client put in its
// authenticator checksum (RFC 4121 §4.1.1), or 0 without that checksum.
func authenticatorFlags(a types.Authenticator) uint32 {
	const gssChecksum = 0x8003
	if a.Cksum.CksumType != gssChecksum || len(a.Cksum.Checksum) < 24 {
		return 0
	}
	return binary.LittleEndian.Uint32(a.Cksum.Checksum[20:24])
}
