package link

import (
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/flynn/noise"

	"burrow/wire"
)

// The handshake is Noise XX: both sides prove their static X25519 key and
// send their certificate encrypted. The first message also says whether
// the initiator's CPU has AES instructions; the responder picks the
// transport cipher in the second. Both payloads are mixed into the
// handshake hash, so the choice cannot be altered in flight.
var handshakeSuite = noise.NewCipherSuite(noise.DH25519, noise.CipherChaChaPoly, noise.HashBLAKE2s)

const (
	// Version 2 added the boot stamp to both certificate payloads;
	// version 3 pads the first message to InitLen.
	payloadVersion = 3
	flagAESFast    = 1
	// maxCertLen bounds what a peer may make us parse.
	maxCertLen = 1024
)

// Anti-amplification: an initiation's Noise message is padded to InitLen
// bytes on the wire, and a cookie slot (empty, or the responder's cookie
// when it asked for one) follows it. A responder answers at once only
// when its answer, which carries its certificate, is no longer than the
// initiation it got: with the slot, a certificate of up to 168 bytes
// (burrow cert sign without addresses or groups makes about 150). A longer
// answer waits for the initiation to come back with a cookie, which proves
// the initiator receives at its address. A spoofed initiation thus never
// makes a node send more bytes than it got.
const InitLen = 272

// initOverhead is what the wire header and Noise's ephemeral key take of
// an initiation; its payload fills the rest.
const initOverhead = wire.HandshakeHeaderLen + 32

// replyLen is the length on the wire of a responder's answer carrying
// cert: the header, the ephemeral key, the encrypted static key and the
// encrypted payload (version, cipher, boot stamp, certificate length and
// certificate), each encryption with its 16-byte tag.
func replyLen(cert []byte) int {
	return wire.HandshakeHeaderLen + 32 + (32 + 16) + (2 + 8 + 2 + len(cert) + 16)
}

// HandshakeConfig is what a node brings to every handshake.
type HandshakeConfig struct {
	Network string // bound into the prologue: other networks fail early
	Private [32]byte
	Public  [32]byte
	Cert    []byte // this node's marshalled certificate
	AESFast bool   // this CPU has AES instructions
	Rand    io.Reader
	// Boot is drawn once per start of the node. A peer that sees it change
	// knows the node restarted and lost everything learned over the old
	// link, even when the new handshake beats the old link's timeout.
	Boot uint64
	// DH, when set, replaces X25519 in the handshake; both ends must use
	// the same. The simulator sets a cheap stand-in, since X25519 took a
	// quarter of its time; a daemon leaves it nil.
	DH noise.DHFunc
}

func (c *HandshakeConfig) noiseConfig(initiator bool) noise.Config {
	suite := handshakeSuite
	if c.DH != nil {
		suite = noise.NewCipherSuite(c.DH, noise.CipherChaChaPoly, noise.HashBLAKE2s)
	}
	return noise.Config{
		CipherSuite:   suite,
		Random:        c.Rand,
		Pattern:       noise.HandshakeXX,
		Initiator:     initiator,
		Prologue:      append([]byte("burrow handshake v1\x00"), c.Network...),
		StaticKeypair: noise.DHKey{Private: c.Private[:], Public: c.Public[:]},
	}
}

// ErrHandshake is wrapped by every handshake failure.
var ErrHandshake = errors.New("link: handshake failed")

// Initiator is our side of a handshake we started.
type Initiator struct {
	cfg    *HandshakeConfig
	hs     *noise.HandshakeState
	cipher Cipher
}

// StartHandshake creates an initiator and its first Noise message.
func StartHandshake(cfg *HandshakeConfig) (*Initiator, []byte, error) {
	hs, err := noise.NewHandshakeState(cfg.noiseConfig(true))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrHandshake, err)
	}
	flags := byte(0)
	if cfg.AESFast {
		flags |= flagAESFast
	}
	payload := make([]byte, InitLen-initOverhead)
	payload[0], payload[1] = payloadVersion, flags
	msg, _, _, err := hs.WriteMessage(nil, payload)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrHandshake, err)
	}
	return &Initiator{cfg: cfg, hs: hs}, msg, nil
}

// PeerHello is what the other side proved about itself: its static key
// (authenticated by Noise) and the certificate it claims for that key.
type PeerHello struct {
	Static [32]byte
	Cert   []byte
	Boot   uint64
}

// ReadReply consumes the responder's message and returns its hello. The
// caller verifies the certificate before calling Finish.
func (i *Initiator) ReadReply(msg []byte) (PeerHello, error) {
	var hello PeerHello
	payload, _, _, err := i.hs.ReadMessage(nil, msg)
	if err != nil {
		return hello, fmt.Errorf("%w: %v", ErrHandshake, err)
	}
	if len(payload) < 3 || payload[0] != payloadVersion {
		return hello, fmt.Errorf("%w: malformed reply payload", ErrHandshake)
	}
	i.cipher = Cipher(payload[1])
	if i.cipher != ChaCha20Poly1305 && !(i.cipher == AES256GCM && i.cfg.AESFast) {
		return hello, fmt.Errorf("%w: peer chose %v", ErrHandshake, i.cipher)
	}
	hello.Boot, hello.Cert, err = readBootAndCert(payload[2:])
	if err != nil {
		return hello, err
	}
	copy(hello.Static[:], i.hs.PeerStatic())
	return hello, nil
}

// Finish writes the last handshake message and derives the session keys.
func (i *Initiator) Finish() ([]byte, *Session, error) {
	payload := appendBootAndCert([]byte{payloadVersion}, i.cfg)
	msg, toResponder, toInitiator, err := i.hs.WriteMessage(nil, payload)
	if err != nil || toResponder == nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrHandshake, err)
	}
	s, err := deriveSession(i.cipher, i.hs.ChannelBinding(), toResponder, toInitiator)
	if err != nil {
		return nil, nil, err
	}
	s.Initiator = true
	return msg, s, nil
}

// Responder is our side of a handshake a peer started.
type Responder struct {
	cfg    *HandshakeConfig
	hs     *noise.HandshakeState
	cipher Cipher
}

// RespondHandshake consumes an initiator's first message and writes the reply.
func RespondHandshake(cfg *HandshakeConfig, msg []byte) (*Responder, []byte, error) {
	hs, err := noise.NewHandshakeState(cfg.noiseConfig(false))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrHandshake, err)
	}
	payload, _, _, err := hs.ReadMessage(nil, msg)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrHandshake, err)
	}
	if len(payload) != InitLen-initOverhead || payload[0] != payloadVersion {
		return nil, nil, fmt.Errorf("%w: malformed init payload", ErrHandshake)
	}
	r := &Responder{cfg: cfg, hs: hs, cipher: ChaCha20Poly1305}
	if payload[1]&flagAESFast != 0 && cfg.AESFast {
		r.cipher = AES256GCM
	}
	reply := appendBootAndCert([]byte{payloadVersion, byte(r.cipher)}, cfg)
	out, _, _, err := hs.WriteMessage(nil, reply)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrHandshake, err)
	}
	return r, out, nil
}

// ReadFinish consumes the initiator's last message, returning its hello and
// the session. The caller verifies the certificate before using the session.
func (r *Responder) ReadFinish(msg []byte) (PeerHello, *Session, error) {
	var hello PeerHello
	payload, toResponder, toInitiator, err := r.hs.ReadMessage(nil, msg)
	if err != nil || toResponder == nil {
		return hello, nil, fmt.Errorf("%w: %v", ErrHandshake, err)
	}
	if len(payload) < 1 || payload[0] != payloadVersion {
		return hello, nil, fmt.Errorf("%w: malformed finish payload", ErrHandshake)
	}
	if hello.Boot, hello.Cert, err = readBootAndCert(payload[1:]); err != nil {
		return hello, nil, err
	}
	copy(hello.Static[:], r.hs.PeerStatic())
	s, err := deriveSession(r.cipher, r.hs.ChannelBinding(), toInitiator, toResponder)
	return hello, s, err
}

func appendBootAndCert(dst []byte, cfg *HandshakeConfig) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, cfg.Boot)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(cfg.Cert)))
	return append(dst, cfg.Cert...)
}

func readBootAndCert(b []byte) (uint64, []byte, error) {
	if len(b) < 8+2 {
		return 0, nil, fmt.Errorf("%w: missing boot stamp or certificate", ErrHandshake)
	}
	boot, b := binary.LittleEndian.Uint64(b), b[8:]
	n := int(binary.LittleEndian.Uint16(b))
	if n == 0 || n > maxCertLen || len(b) != 2+n {
		return 0, nil, fmt.Errorf("%w: bad certificate length", ErrHandshake)
	}
	return boot, b[2:], nil
}

// deriveSession turns Noise's final keys into transport keys for the chosen
// cipher, salted with the handshake hash and labelled with the cipher.
func deriveSession(c Cipher, handshakeHash []byte, send, recv *noise.CipherState) (*Session, error) {
	label := "burrow transport v1 " + c.String()
	sendKey, err := transportKey(send.UnsafeKey(), handshakeHash, label)
	if err != nil {
		return nil, err
	}
	recvKey, err := transportKey(recv.UnsafeKey(), handshakeHash, label)
	if err != nil {
		return nil, err
	}
	return newSession(c, sendKey, recvKey)
}

func transportKey(secret [32]byte, salt []byte, label string) ([]byte, error) {
	return hkdf.Key(sha256.New, secret[:], salt, label, 32)
}
