package dht

import (
	"bytes"
	"cmp"
	"slices"
	"time"

	"burrow/nid"
)

// record is one stored copy. A dead record (deleted, or past its lease) is
// kept for Config.Grace so that its version still orders late copies.
type record struct {
	key     string
	pos     nid.ID
	value   []byte
	owner   nid.ID
	version uint64
	expires time.Time // on this node's clock; the deletion time for a tombstone
	dead    bool      // deleted
	// refreshed is when a primary last confirmed this copy, or when this
	// node last was primary for it.
	refreshed time.Time
	proof     *proof // the owner's signature; nil without an Authority
}

func (r *record) live(now time.Time) bool { return !r.dead && now.Before(r.expires) }

func (r *record) wire(now time.Time) wireRecord {
	return wireRecord{Key: r.key, Owner: r.owner, Version: r.version, Dead: r.dead, Value: r.value,
		Remaining: remainingMillis(r.expires, now), Proof: r.proof}
}

// recordFromWire makes a local copy. A signed lease lives no longer than
// its owner signed for, whatever lifetime the copy claims.
func recordFromWire(w *wireRecord, now time.Time) *record {
	r := &record{
		key:       w.Key,
		pos:       Position(w.Key),
		value:     w.Value,
		owner:     w.Owner,
		version:   w.Version,
		expires:   anchor(w.Remaining, now),
		dead:      w.Dead,
		refreshed: now,
		proof:     w.Proof,
	}
	if w.Proof != nil && !w.Dead && r.expires.After(signedEnd(w.Proof)) {
		r.expires = signedEnd(w.Proof)
	}
	return r
}

func (r *record) sameContent(w *wireRecord) bool {
	return r.owner == w.Owner && r.dead == w.Dead && bytes.Equal(r.value, w.Value) && r.sameProof(w)
}

// sameProof reports whether w carries the very signature r was stored
// with, which was checked then: such a copy needs no second check.
func (r *record) sameProof(w *wireRecord) bool {
	if r.proof == nil || w.Proof == nil {
		return r.proof == w.Proof
	}
	return *r.proof == *w.Proof
}

// compareCopies orders two copies of a key: by version, then, for equal
// versions with different content (two primaries that raced), by content,
// so every node picks the same winner.
func compareCopies(r *record, w *wireRecord) int {
	if c := cmp.Compare(r.version, w.Version); c != 0 {
		return c
	}
	if c := r.owner.Compare(w.Owner); c != 0 {
		return c
	}
	if r.dead != w.Dead {
		if r.dead {
			return 1 // a deletion beats a write of the same version
		}
		return -1
	}
	return bytes.Compare(r.value, w.Value)
}

// anchor turns a remaining lifetime into a time on this node's clock.
func anchor(remainingMillis uint32, now time.Time) time.Time {
	return now.Add(time.Duration(remainingMillis) * time.Millisecond)
}

// remainingMillis is how long until t, rounded up so that a live record
// never travels as dead; 0 when t is zero or past.
func remainingMillis(t, now time.Time) uint32 {
	if t.IsZero() || !now.Before(t) {
		return 0
	}
	d := t.Sub(now)
	ms := (d + time.Millisecond - 1) / time.Millisecond
	return uint32(min(ms, time.Duration(1<<32-1)))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func (p *Participant) store(r *record) {
	if old := p.records[r.key]; old != nil {
		delete(p.byPos, old.pos)
	}
	p.records[r.key] = r
	p.byPos[r.pos] = r
}

func (p *Participant) drop(r *record) {
	delete(p.records, r.key)
	delete(p.byPos, r.pos)
}

// merge takes in a copy that arrived outside a write (sync, digest answer,
// handoff), newest version wins. A newer copy of a key with a write in
// flight here interrupts that write: this node missed something.
func (p *Participant) merge(in *wireRecord, now time.Time) {
	if len(in.Key) > p.cfg.MaxKeyLen || len(in.Value) > p.cfg.MaxValueLen {
		return
	}
	local := p.records[in.Key]
	if local == nil {
		if len(p.records) < p.hardCap() && p.verifiedCopy(in) {
			p.store(recordFromWire(in, now))
		}
		return
	}
	switch c := compareCopies(local, in); {
	case c > 0:
		return
	case c == 0 && local.sameProof(in):
		local.expires = later(local.expires, anchor(in.Remaining, now))
		local.refreshed = now
		return
	}
	if !p.verifiedCopy(in) {
		return
	}
	if ks := p.keys[in.Key]; ks != nil && ks.round != nil {
		p.resolveConflict(ks, in, now)
		return
	}
	p.store(recordFromWire(in, now))
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func sortedOpIDs(m map[uint64]*clientOp) []uint64 {
	ids := make([]uint64, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
