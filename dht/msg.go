package dht

import (
	"encoding/binary"
	"errors"

	"burrow/nid"
)

// wireVersion is the first byte of every DHT message. Version 2 added the
// owners' proofs.
const wireVersion = 2

// msgType is the second byte of every DHT message.
type msgType uint8

const (
	// msgRequest carries a client operation toward the key's primary.
	msgRequest msgType = iota + 1
	// msgResponse answers a request, straight to its origin.
	msgResponse
	// msgReplicate copies one write from the primary to a replica, with
	// the version the primary based the write on.
	msgReplicate
	// msgReplicaAck answers msgReplicate and msgCheck: stored (or nothing
	// newer known), or the replica's newer copy when it knows something
	// the primary did not.
	msgReplicaAck
	// msgSyncRequest asks a successor for every record in (From, To].
	msgSyncRequest
	// msgRecords carries record copies, merged newest-wins: answers to
	// sync and want, handoffs on leave, newer copies pushed back.
	msgRecords
	// msgDigest lists a primary's (position, version) pairs to a replica.
	msgDigest
	// msgWant names the positions a replica lacks after a digest.
	msgWant
	// msgCheck asks a replica whether it knows a version of a key newer
	// than the primary's, before the primary answers from its copy.
	msgCheck
	maxMsgType
)

// op is a client operation.
type op uint8

const (
	opGet op = iota + 1
	opPut
	opPutIfAbsent
	opDelete
	opRenew
	maxOp
)

var opNames = [...]string{opGet: "get", opPut: "put", opPutIfAbsent: "put-if-absent", opDelete: "delete", opRenew: "renew"}

// Wire limits. The participant enforces tighter ones from its Config.
const (
	maxWireKey       = 255
	maxWireEntries   = 4096
	recordFlagDead   = 1 // tombstone
	recordFlagSigned = 2 // a proof follows the value
)

// Decoding errors.
var (
	errTruncated = errors.New("dht: message truncated")
	errVersion   = errors.New("dht: unknown message version")
	errType      = errors.New("dht: unknown message type")
	errField     = errors.New("dht: invalid message field")
	errTrailing  = errors.New("dht: bytes after the message")
)

// wireRecord is a record copy as it travels: its lifetime is relative, so
// that nodes need not share a clock; each receiver anchors it to its own.
type wireRecord struct {
	Key       string
	Owner     nid.ID
	Version   uint64
	Remaining uint32 // milliseconds the record (or the tombstone) still lives
	Dead      bool   // deleted: a tombstone that keeps the version
	Value     []byte
	Proof     *proof
}

type digestEntry struct {
	Pos     nid.ID
	Version uint64
}

// message is every DHT message; which fields travel depends on Type.
type message struct {
	Type msgType

	ID     uint64 // all but Digest and Want: matches answers to requests
	Origin nid.ID // Request: the client, owner of what it writes
	Op     op     // Request
	Hops   uint8  // Request: forwards left
	TTL    uint32 // Request: lease in milliseconds
	Key    string // Request, ReplicaAck, Check
	Value  []byte // Request, Response
	Proof  *proof // Request: the origin's signature on its write; Response: the owner's on the record
	Cert   []byte // Request: the origin's certificate, with a proof

	Status    Status // Response, ReplicaAck
	Owner     nid.ID // Response
	Remaining uint32 // Response: milliseconds the record still lives

	Base uint64 // Replicate: the version the write replaces; Check: the primary's version

	From, To nid.ID // SyncRequest: the range (From, To]

	Seq, Total uint16       // Records: batch number and count of an answer
	Records    []wireRecord // Replicate (one), ReplicaAck (zero or one), Records
	Digest     []digestEntry
	Wants      []nid.ID
}

func appendKey(b []byte, k string) []byte {
	b = append(b, byte(len(k)))
	return append(b, k...)
}

func appendValue(b []byte, v []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(v)))
	return append(b, v...)
}

func appendRecord(b []byte, r *wireRecord) []byte {
	var flags byte
	if r.Dead {
		flags |= recordFlagDead
	}
	if r.Proof != nil {
		flags |= recordFlagSigned
	}
	b = append(b, flags)
	b = appendKey(b, r.Key)
	b = append(b, r.Owner[:]...)
	b = binary.BigEndian.AppendUint64(b, r.Version)
	b = binary.BigEndian.AppendUint32(b, r.Remaining)
	b = appendValue(b, r.Value)
	if r.Proof != nil {
		b = appendProof(b, r.Proof)
	}
	return b
}

func appendProof(b []byte, pr *proof) []byte {
	b = append(b, pr.Key[:]...)
	b = binary.BigEndian.AppendUint64(b, pr.Stamp)
	b = binary.BigEndian.AppendUint32(b, pr.Until)
	return append(b, pr.Sig[:]...)
}

// appendOptionalProof writes a presence byte, then the proof if any.
func appendOptionalProof(b []byte, pr *proof) []byte {
	if pr == nil {
		return append(b, 0)
	}
	return appendProof(append(b, 1), pr)
}

// recordLen is the encoded size of r with a proof, whether it has one or not.
func recordLen(r *wireRecord) int {
	return 1 + 1 + len(r.Key) + nid.Size + 8 + 4 + 2 + len(r.Value) + proofLen
}

// append encodes m after b. Fields must respect the wire limits; the
// participant only builds messages that do.
func (m *message) append(b []byte) []byte {
	b = append(b, wireVersion, byte(m.Type))
	switch m.Type {
	case msgRequest:
		b = binary.BigEndian.AppendUint64(b, m.ID)
		b = append(b, m.Origin[:]...)
		b = append(b, byte(m.Op), m.Hops)
		b = binary.BigEndian.AppendUint32(b, m.TTL)
		b = appendKey(b, m.Key)
		b = appendValue(b, m.Value)
		b = appendOptionalProof(b, m.Proof)
		b = appendValue(b, m.Cert)
	case msgResponse:
		b = binary.BigEndian.AppendUint64(b, m.ID)
		b = append(b, byte(m.Status))
		b = append(b, m.Owner[:]...)
		b = binary.BigEndian.AppendUint32(b, m.Remaining)
		b = appendValue(b, m.Value)
		b = appendOptionalProof(b, m.Proof)
	case msgReplicate:
		b = binary.BigEndian.AppendUint64(b, m.ID)
		b = binary.BigEndian.AppendUint64(b, m.Base)
		b = appendRecord(b, &m.Records[0])
	case msgCheck:
		b = binary.BigEndian.AppendUint64(b, m.ID)
		b = binary.BigEndian.AppendUint64(b, m.Base)
		b = appendKey(b, m.Key)
	case msgReplicaAck:
		b = binary.BigEndian.AppendUint64(b, m.ID)
		b = append(b, byte(m.Status))
		b = appendKey(b, m.Key)
		b = append(b, byte(len(m.Records)))
		for i := range m.Records {
			b = appendRecord(b, &m.Records[i])
		}
	case msgSyncRequest:
		b = binary.BigEndian.AppendUint64(b, m.ID)
		b = append(b, m.From[:]...)
		b = append(b, m.To[:]...)
	case msgRecords:
		b = binary.BigEndian.AppendUint64(b, m.ID)
		b = binary.BigEndian.AppendUint16(b, m.Seq)
		b = binary.BigEndian.AppendUint16(b, m.Total)
		b = binary.BigEndian.AppendUint16(b, uint16(len(m.Records)))
		for i := range m.Records {
			b = appendRecord(b, &m.Records[i])
		}
	case msgDigest:
		b = binary.BigEndian.AppendUint16(b, uint16(len(m.Digest)))
		for _, e := range m.Digest {
			b = append(b, e.Pos[:]...)
			b = binary.BigEndian.AppendUint64(b, e.Version)
		}
	case msgWant:
		b = binary.BigEndian.AppendUint16(b, uint16(len(m.Wants)))
		for _, w := range m.Wants {
			b = append(b, w[:]...)
		}
	}
	return b
}

// parseMessage decodes a DHT message strictly: unknown versions, types,
// flags, statuses or operations, bad lengths and trailing bytes are errors.
// It copies what it keeps.
func parseMessage(b []byte) (message, error) {
	var m message
	if len(b) < 2 {
		return m, errTruncated
	}
	if b[0] != wireVersion {
		return m, errVersion
	}
	m.Type = msgType(b[1])
	if m.Type == 0 || m.Type >= maxMsgType {
		return m, errType
	}
	r := reader{b: b[2:]}
	switch m.Type {
	case msgRequest:
		m.ID = r.u64()
		m.Origin = r.id()
		m.Op = op(r.u8())
		m.Hops = r.u8()
		m.TTL = r.u32()
		m.Key = r.key()
		m.Value = r.value()
		m.Proof = r.optionalProof()
		m.Cert = r.value()
		if r.err == nil && (m.Op == 0 || m.Op >= maxOp) {
			r.fail(errField)
		}
	case msgResponse:
		m.ID = r.u64()
		m.Status = r.status()
		m.Owner = r.id()
		m.Remaining = r.u32()
		m.Value = r.value()
		m.Proof = r.optionalProof()
	case msgReplicate:
		m.ID = r.u64()
		m.Base = r.u64()
		m.Records = []wireRecord{r.record()}
		if r.err == nil && m.Records[0].Version <= m.Base {
			r.fail(errField) // a write always moves the version forward
		}
	case msgCheck:
		m.ID = r.u64()
		m.Base = r.u64()
		m.Key = r.key()
	case msgReplicaAck:
		m.ID = r.u64()
		m.Status = r.status()
		m.Key = r.key()
		switch r.u8() {
		case 0:
		case 1:
			m.Records = []wireRecord{r.record()}
		default:
			r.fail(errField)
		}
	case msgSyncRequest:
		m.ID = r.u64()
		m.From = r.id()
		m.To = r.id()
	case msgRecords:
		m.ID = r.u64()
		m.Seq = r.u16()
		m.Total = r.u16()
		if r.err == nil && m.Seq >= m.Total {
			r.fail(errField)
		}
		n := r.count()
		for range n {
			if r.err != nil {
				break
			}
			m.Records = append(m.Records, r.record())
		}
	case msgDigest:
		n := r.count()
		if r.err == nil && len(r.b) < n*(nid.Size+8) {
			r.fail(errTruncated)
		}
		for range n {
			if r.err != nil {
				break
			}
			m.Digest = append(m.Digest, digestEntry{Pos: r.id(), Version: r.u64()})
		}
	case msgWant:
		n := r.count()
		if r.err == nil && len(r.b) < n*nid.Size {
			r.fail(errTruncated)
		}
		for range n {
			if r.err != nil {
				break
			}
			m.Wants = append(m.Wants, r.id())
		}
	}
	if r.err != nil {
		return message{}, r.err
	}
	if len(r.b) != 0 {
		return message{}, errTrailing
	}
	return m, nil
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if len(r.b) < n {
		r.err = errTruncated
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) u8() byte {
	if b := r.take(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *reader) u16() uint16 {
	if b := r.take(2); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if b := r.take(4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if b := r.take(8); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

func (r *reader) id() nid.ID {
	var id nid.ID
	if b := r.take(nid.Size); b != nil {
		copy(id[:], b)
	}
	return id
}

func (r *reader) key() string {
	n := int(r.u8())
	if r.err == nil && n == 0 {
		r.fail(errField)
	}
	return string(r.take(n))
}

// value returns a copy; an empty value decodes as nil.
func (r *reader) value() []byte {
	n := int(r.u16())
	b := r.take(n)
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}

func (r *reader) count() int {
	n := int(r.u16())
	if n > maxWireEntries {
		r.fail(errField)
		return 0
	}
	return n
}

func (r *reader) status() Status {
	s := Status(r.u8())
	if r.err == nil && s >= maxStatus {
		r.fail(errField)
	}
	return s
}

func (r *reader) record() wireRecord {
	var w wireRecord
	flags := r.u8()
	if r.err == nil && flags&^(recordFlagDead|recordFlagSigned) != 0 {
		r.fail(errField)
	}
	w.Dead = flags&recordFlagDead != 0
	w.Key = r.key()
	w.Owner = r.id()
	w.Version = r.u64()
	w.Remaining = r.u32()
	w.Value = r.value()
	if flags&recordFlagSigned != 0 {
		w.Proof = r.proof()
	}
	if r.err == nil && w.Version == 0 {
		r.fail(errField) // version 0 means "no record"
	}
	return w
}

func (r *reader) proof() *proof {
	b := r.take(proofLen)
	if b == nil {
		return nil
	}
	pr := &proof{Stamp: binary.BigEndian.Uint64(b[32:40]), Until: binary.BigEndian.Uint32(b[40:44])}
	copy(pr.Key[:], b[:32])
	copy(pr.Sig[:], b[44:])
	return pr
}

// optionalProof reads a presence byte, then the proof if there is one.
func (r *reader) optionalProof() *proof {
	switch r.u8() {
	case 0:
		return nil
	case 1:
		return r.proof()
	}
	r.fail(errField)
	return nil
}
