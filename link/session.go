package link

import (
	"crypto/aes"
	"crypto/cipher"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/chacha20poly1305"

	"burrow/nid"
	"burrow/wire"
)

// Cipher names the transport AEAD a session uses. It is chosen during the
// handshake and bound into it.
type Cipher uint8

// Transport ciphers.
const (
	ChaCha20Poly1305 Cipher = 1
	AES256GCM        Cipher = 2
)

func (c Cipher) String() string {
	switch c {
	case ChaCha20Poly1305:
		return "chacha20-poly1305"
	case AES256GCM:
		return "aes-256-gcm"
	}
	return fmt.Sprintf("cipher(%d)", uint8(c))
}

func (c Cipher) newAEAD(key []byte) (cipher.AEAD, error) {
	switch c {
	case ChaCha20Poly1305:
		return chacha20poly1305.New(key)
	case AES256GCM:
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, err
		}
		return cipher.NewGCM(block)
	}
	return nil, fmt.Errorf("link: unknown cipher %d", c)
}

// Limits after which a session must not be used any more, whatever happens.
const (
	// RejectAfterMessages keeps counters far from wrapping.
	RejectAfterMessages = 1<<64 - 1<<16
)

// Counters are the traffic statistics of one link, shared by its sessions
// and updated by the data path without locks.
type Counters struct {
	// First: the timers read them, right after the Link's fields they read.
	lastRx, lastTx                         atomic.Int64 // unix nanoseconds
	RxPackets, RxBytes, TxPackets, TxBytes atomic.Uint64
	health                                 health
}

// LastRx is when an authenticated message last arrived on the link: a
// transport message, or the peer's half of a handshake.
func (c *Counters) LastRx() time.Time { return unixNano(c.lastRx.Load()) }

// LastTx is when the link last sent a message.
func (c *Counters) LastTx() time.Time { return unixNano(c.lastTx.Load()) }

func unixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// storeIfLater moves a timestamp forward, tolerating racing writers.
func storeIfLater(v *atomic.Int64, n int64) {
	for {
		old := v.Load()
		if n <= old || v.CompareAndSwap(old, n) {
			return
		}
	}
}

// Session is one set of transport keys between two nodes. Seal and Open are
// safe for concurrent use by data-path workers.
type Session struct {
	LocalIndex  uint32 // what the peer puts in its transport headers to us
	RemoteIndex uint32 // what we put in ours
	Peer        nid.ID
	Cipher      Cipher
	Counters    *Counters

	send, recv cipher.AEAD
	sent       atomic.Uint64 // next send counter
	received   atomic.Uint64 // messages opened, for rekey-on-volume
	// The timers read sent, received and the fields down to seenReceived
	// at every tick: they share a cache line, and the data path's fields
	// before them are one it does not write.
	Created   time.Time
	Initiator bool        // we sent the first handshake message
	confirmed atomic.Bool // the peer has proven it holds the keys

	// Kept by the Manager: when the peer was last seen sending on this
	// session, sampled from received at each tick.
	seenReceived uint64
	lastUsed     time.Time

	mu     sync.Mutex
	replay replayWindow
}

func newSession(c Cipher, sendKey, recvKey []byte) (*Session, error) {
	send, err := c.newAEAD(sendKey)
	if err != nil {
		return nil, err
	}
	recv, err := c.newAEAD(recvKey)
	if err != nil {
		return nil, err
	}
	return &Session{Cipher: c, send: send, recv: recv}, nil
}

// Errors from Open; the data path counts them by reason.
var (
	ErrAuth      = errors.New("link: message failed authentication")
	ErrReplay    = errors.New("link: replayed or too old message")
	ErrExhausted = errors.New("link: session exhausted")
)

// ErrShortBuffer: Seal's buffer has no room for the datagram.
var ErrShortBuffer = errors.New("link: buffer too short for the datagram")

// Seal encrypts plain into buf: the transport header first, then the
// ciphertext and its tag, and returns the datagram, a prefix of buf. plain
// is either buf's own bytes right after the header (sealing in place) or
// lies apart from buf, as a segment read from the TAP does. now is unix
// nanoseconds.
func (s *Session) Seal(buf, plain []byte, now int64) ([]byte, error) {
	n := len(plain)
	if len(buf) < wire.TransportOverhead+n {
		return nil, ErrShortBuffer
	}
	counter := s.sent.Add(1) - 1
	if counter >= RejectAfterMessages {
		return nil, ErrExhausted
	}
	wire.PutTransportHeader(buf, s.RemoteIndex, counter)
	header := buf[:wire.TransportHeaderLen]
	s.send.Seal(buf[wire.TransportHeaderLen:wire.TransportHeaderLen], wire.Nonce(header), plain, wire.AdditionalData(header))
	s.Counters.TxPackets.Add(1)
	s.Counters.TxBytes.Add(uint64(n))
	storeIfLater(&s.Counters.lastTx, now)
	return buf[:wire.TransportOverhead+n], nil
}

// Open authenticates and decrypts a transport datagram addressed to this
// session, in place, and returns the plaintext. The replay check runs after
// authentication so forged counters cannot move the window.
// It reports whether this was the first message proving the peer has the keys.
func (s *Session) Open(datagram []byte, counter uint64, now int64) (plain []byte, first bool, err error) {
	header := datagram[:wire.TransportHeaderLen]
	body := datagram[wire.TransportHeaderLen:]
	plain, err = s.recv.Open(body[:0], wire.Nonce(header), body, wire.AdditionalData(header))
	if err != nil {
		return nil, false, ErrAuth
	}
	s.mu.Lock()
	fresh := s.replay.accept(counter)
	s.mu.Unlock()
	if !fresh {
		return nil, false, ErrReplay
	}
	s.received.Add(1)
	s.Counters.RxPackets.Add(1)
	s.Counters.RxBytes.Add(uint64(len(plain)))
	storeIfLater(&s.Counters.lastRx, now)
	s.Counters.health.heard()
	first = !s.confirmed.Load() && s.confirmed.CompareAndSwap(false, true)
	return plain, first, nil
}

// Confirmed reports whether an authenticated message arrived on the session.
func (s *Session) Confirmed() bool { return s.confirmed.Load() }

// Messages is how many messages were sealed and opened with these keys.
func (s *Session) Messages() uint64 { return s.sent.Load() + s.received.Load() }
