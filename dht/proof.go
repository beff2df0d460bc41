package dht

import (
	"crypto/sha256"
	"encoding/binary"
	"math"
	"time"

	"burrow/nid"
)

// SignatureSize is the length of an owner's signature.
const SignatureSize = 64

// Authority proves this node's writes and checks everyone else's. With
// one, every record carries its owner's signature over its key, content
// and lease, made with the key the owner's ID derives from; the primary
// checks it before a write, every replica before it stores a copy, and
// the reader before it believes an answer. So no member can write,
// change or delete a record in another member's name, whatever it sends
// and wherever it sits on the ring.
type Authority interface {
	// PublicKey is this node's static key; the node's ID derives from it.
	PublicKey() [32]byte
	// Sign signs msg with this node's key.
	Sign(msg []byte) [SignatureSize]byte
	// Verify reports whether sig over msg was made by the holder of key,
	// a member in good standing (a revoked member's records are void).
	Verify(key [32]byte, msg []byte, sig [SignatureSize]byte) bool
	// Certificate is this node's certificate, which its write requests
	// carry so that a primary counts records against members, not keys.
	Certificate() []byte
	// Member reports whether cert is a valid certificate, for key, of a
	// member in good standing.
	Member(cert []byte, key [32]byte, now time.Time) bool
}

// proof is an owner's signature on one version of a record.
type proof struct {
	Key   [32]byte // the owner's public key; Owner = nid.FromPublicKey(Key)
	Stamp uint64   // the owner's clock in unix milliseconds: orders its writes of a key
	Until uint32   // unix seconds the owner lets the record live; 0 for a deletion
	Sig   [SignatureSize]byte
}

const (
	proofLen           = 32 + 8 + 4 + SignatureSize
	proofSigningPrefix = "burrow dht record v1\x00"
	// maxClockSkew is how far members' clocks may disagree: a signed lease
	// lives at most this long past the time its owner signed, and a write
	// is refused once its signature is older than that.
	maxClockSkew = time.Minute
	// maxChecked bounds the signatures remembered as checked.
	maxChecked = 1024
	// minOwnerQuota is the fewest records of one owner a primary accepts
	// whatever its share of the ring.
	minOwnerQuota = 8
)

// signedContent is what an owner signs for a record.
func signedContent(b []byte, key string, dead bool, value []byte, pr *proof) []byte {
	b = append(b, proofSigningPrefix...)
	b = appendKey(b, key)
	if dead {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = append(b, pr.Key[:]...)
	b = binary.BigEndian.AppendUint64(b, pr.Stamp)
	b = binary.BigEndian.AppendUint32(b, pr.Until)
	return appendValue(b, value)
}

// sign makes this node's proof for a write of key: a lease until ttl from
// now, or a deletion.
func (p *Participant) sign(key string, dead bool, value []byte, ttl time.Duration, now time.Time) *proof {
	p.lastStamp = max(uint64(max(now.UnixMilli(), 0)), p.lastStamp+1)
	pr := &proof{Key: p.cfg.Auth.PublicKey(), Stamp: p.lastStamp}
	if !dead {
		pr.Until = uint32(min((now.Add(ttl).UnixMilli()+999)/1000, math.MaxUint32))
	}
	p.authBuf = signedContent(p.authBuf[:0], key, dead, value, pr)
	pr.Sig = p.cfg.Auth.Sign(p.authBuf)
	return pr
}

// verified reports whether a copy or an answer of (key, dead, value) by
// owner under pr may be believed: a self-certifying key's by its value
// alone, whoever wrote it (such a record is never deleted), any other by
// its owner's signature.
func (p *Participant) verified(key string, dead bool, value []byte, owner nid.ID, pr *proof) bool {
	if p.selfCertifying(key) {
		return p.validValue(key, dead, value)
	}
	return p.signed(key, dead, value, owner, pr)
}

func (p *Participant) selfCertifying(key string) bool {
	return p.cfg.SelfCertifying != nil && p.cfg.SelfCertifying.Covers(key)
}

// validValue checks a record of a self-certifying key, which is never
// deleted: a tombstone of one is as forged as a value not Valid.
func (p *Participant) validValue(key string, dead bool, value []byte) bool {
	if dead || !p.cfg.SelfCertifying.Valid(key, value) {
		p.stats.Forged++
		return false
	}
	return true
}

// signed reports whether pr proves that owner wrote (key, dead, value).
// Without an Authority every record is taken on trust.
func (p *Participant) signed(key string, dead bool, value []byte, owner nid.ID, pr *proof) bool {
	if p.cfg.Auth == nil {
		return true
	}
	if pr == nil || nid.FromPublicKey(pr.Key) != owner || dead != (pr.Until == 0) {
		p.stats.Forged++
		return false
	}
	p.authBuf = signedContent(p.authBuf[:0], key, dead, value, pr)
	sum := sha256.Sum256(append(p.authBuf, pr.Sig[:]...))
	if p.checked[sum] {
		return true // a retry, or a copy that comes round again
	}
	if !p.cfg.Auth.Verify(pr.Key, p.authBuf, pr.Sig) {
		p.stats.Forged++
		return false
	}
	p.rememberChecked(sum)
	return true
}

// rememberChecked notes a check passed, forgetting the oldest beyond maxChecked.
func (p *Participant) rememberChecked(sum [32]byte) {
	if len(p.checkedLog) == maxChecked {
		delete(p.checked, p.checkedLog[0])
		p.checkedLog = p.checkedLog[1:]
	}
	p.checked[sum] = true
	p.checkedLog = append(p.checkedLog, sum)
}

// verifiedCopy checks a record copy from another node.
func (p *Participant) verifiedCopy(w *wireRecord) bool {
	return p.verified(w.Key, w.Dead, w.Value, w.Owner, w.Proof)
}

// member checks the certificate a request came with, remembering those
// that passed like signatures.
func (p *Participant) member(cert []byte, key [32]byte, now time.Time) bool {
	sum := sha256.Sum256(append(append([]byte("member\x00"), key[:]...), cert...))
	if p.checked[sum] {
		return true
	}
	if !p.cfg.Auth.Member(cert, key, now) {
		p.stats.Forged++
		return false
	}
	p.rememberChecked(sum)
	return true
}

// signedEnd is the latest a record under pr may live on this node's
// clock: its owner's lease plus the skew members' clocks may have.
func signedEnd(pr *proof) time.Time {
	return time.Unix(int64(pr.Until), 0).Add(maxClockSkew)
}

// authorize checks a write request at its primary: signed by its origin,
// a member (so that no one escapes its quota with keys of its own making),
// recently (so that a request replayed later is refused).
func (p *Participant) authorize(r *request, now time.Time) Status {
	if p.cfg.Auth == nil || r.msg.Op == opGet {
		return OK
	}
	pr := r.msg.Proof
	if !p.signed(r.msg.Key, r.msg.Op == opDelete, r.msg.Value, r.msg.Origin, pr) || !p.member(r.msg.Cert, pr.Key, now) {
		return Unproven
	}
	if signedAt := time.UnixMilli(int64(pr.Stamp)); now.Sub(signedAt) > maxClockSkew || signedAt.Sub(now) > maxClockSkew {
		p.stats.Forged++
		return Unproven
	}
	return OK
}

// rollsBack reports whether a write proven by pr is older than the
// owner's write held in local: an old request replayed by anyone must not
// bring back what its owner changed or deleted since. The very write held
// (a retry reaching a new primary) is not older.
func rollsBack(local *record, owner nid.ID, pr *proof) bool {
	if local == nil || pr == nil || local.proof == nil || local.owner != owner {
		return false
	}
	return pr.Stamp < local.proof.Stamp || pr.Stamp == local.proof.Stamp && pr.Sig != local.proof.Sig
}

// overQuota reports whether owner already holds its share of records in
// this node's arc: Config.OwnerQuota spread over the ring by the arc's
// size, doubled for the unevenness of key positions.
func (p *Participant) overQuota(owner nid.ID, now time.Time) bool {
	share := 1.0
	if p.hasPred {
		hi, _ := p.pred.Distance(p.self).Uint128()
		share = float64(hi) / math.Exp2(64)
	}
	limit := max(minOwnerQuota, int(math.Ceil(2*share*float64(p.cfg.OwnerQuota))))
	held := 0
	for _, r := range p.records {
		if r.owner == owner && r.live(now) && p.isPrimary(r.pos) && !p.selfCertifying(r.key) {
			held++
		}
	}
	return held >= limit
}

// DropOwner forgets every record owner wrote, as the CA's revocation of
// owner voids them; other nodes do the same when they learn of it.
// Self-certifying records stay: they never rested on their writer.
func (p *Participant) DropOwner(owner nid.ID) {
	p.run(func() {
		for _, key := range sortedKeys(p.records) {
			if r := p.records[key]; r.owner == owner && !p.selfCertifying(key) {
				p.drop(r)
			}
		}
		clear(p.checked) // signatures checked before the revocation
		p.checkedLog = p.checkedLog[:0]
	})
}
