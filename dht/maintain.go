package dht

import (
	"slices"
	"time"

	"burrow/nid"
)

// syncState is a gained arc (from, to] being pulled from the successors.
// Operations on its keys wait until it is done.
type syncState struct {
	id        uint64
	from, to  nid.ID
	pending   []nid.ID // successors that have not answered completely
	got       map[nid.ID][]bool
	nextRetry time.Time
	deadline  time.Time
}

func (p *Participant) tick(now time.Time) {
	p.expireHandoffs(now)
	p.tickClients(now)
	p.retryRounds(now)
	p.tickSyncs(now)
	if !now.Before(p.nextRefresh) {
		p.nextRefresh = now.Add(p.cfg.RefreshInterval)
		for _, t := range p.replicaTargets() {
			p.sendDigest(t, now)
		}
	}
	if !now.Before(p.nextSweep) {
		p.nextSweep = now.Add(min(time.Second, p.cfg.Grace))
		p.sweep(now)
	}
}

// ringChanged reacts to new neighbours: a grown arc is pulled from the
// successors, new replicas get a digest, pending writes are retargeted and
// queued operations for keys that moved away are forwarded.
func (p *Participant) ringChanged(now time.Time) {
	pred, hasPred := p.env.Predecessor()
	switch {
	case hasPred && !p.hasPred:
		p.startSync(pred, p.self, now)
	case hasPred && pred != p.pred && nid.InOpen(p.pred, pred, p.self):
		p.startSync(pred, p.pred, now) // the arc grew by (pred, old pred]
	}
	p.pred, p.hasPred = pred, hasPred
	p.expireHandoffs(now)

	targets := p.replicaTargets()
	for _, t := range targets {
		if !slices.Contains(p.replicas, t) {
			p.sendDigest(t, now)
		}
	}
	p.replicas = targets
	p.retargetRounds(now)

	for _, key := range sortedKeys(p.keys) {
		ks := p.keys[key]
		if ks.round != nil || len(ks.queue) == 0 || p.isPrimary(Position(key)) {
			continue
		}
		queue := ks.queue
		ks.queue = nil
		delete(p.keys, key)
		for _, r := range queue {
			p.forward(r)
		}
	}
	p.releaseDeferred(now)
}

// expireHandoffs drops handoffs the view has caught up with, or that
// outlived their time.
func (p *Participant) expireHandoffs(now time.Time) {
	p.handoffs = slices.DeleteFunc(p.handoffs, func(h handoff) bool {
		return !now.Before(h.until) || p.hasPred && (p.pred == h.to || nid.InOpen(p.pred, h.to, p.self))
	})
}

func (p *Participant) startSync(from, to nid.ID, now time.Time) {
	succ := slices.DeleteFunc(slices.Clone(p.env.Successors(p.cfg.Replicas)), func(id nid.ID) bool { return id == p.self })
	if len(succ) == 0 {
		return
	}
	p.nextID++
	s := &syncState{
		id:        p.nextID,
		from:      from,
		to:        to,
		pending:   slices.Clone(succ),
		got:       make(map[nid.ID][]bool),
		nextRetry: now.Add(p.cfg.RetryInterval),
		deadline:  now.Add(p.cfg.SyncTimeout),
	}
	p.syncs = append(p.syncs, s)
	for _, t := range s.pending {
		p.send(t, true, &message{Type: msgSyncRequest, ID: s.id, From: from, To: to})
	}
}

// syncingPos reports whether pos is in an arc still being handed over.
func (p *Participant) syncingPos(pos nid.ID) bool {
	for _, s := range p.syncs {
		if pos == s.to || nid.InOpen(pos, s.from, s.to) {
			return true
		}
	}
	return false
}

func (p *Participant) tickSyncs(now time.Time) {
	ended := false
	p.syncs = slices.DeleteFunc(p.syncs, func(s *syncState) bool {
		if !now.Before(s.deadline) {
			ended = true
			return true
		}
		if !now.Before(s.nextRetry) {
			s.nextRetry = now.Add(p.cfg.RetryInterval)
			for _, t := range s.pending {
				p.send(t, true, &message{Type: msgSyncRequest, ID: s.id, From: s.from, To: s.to})
			}
		}
		return false
	})
	if ended {
		p.releaseDeferred(now)
	}
}

// releaseDeferred runs the operations that waited for a finished sync.
func (p *Participant) releaseDeferred(now time.Time) {
	if len(p.deferred) == 0 {
		return
	}
	waiting := p.deferred
	p.deferred = nil
	for _, r := range waiting {
		p.handleRequest(r, now)
	}
}

// handleSyncRequest answers with every copy in the asked arc, tombstones
// included, in batches that fit a message.
//
// A request from a node between this node's predecessor and itself comes
// from a newcomer taking over part of this node's arc: from then on this
// node stops serving that part and sends its requests to the newcomer, so
// that the two never act as primary for the same key at once. The
// handoff lasts until the view shows the newcomer, or two refresh
// intervals if it never does (the newcomer died).
func (p *Participant) handleSyncRequest(from nid.ID, m *message, now time.Time) {
	if from == m.To && from != p.self && (!p.hasPred || nid.InOpen(from, p.pred, p.self)) {
		if _, known := p.handedOff(from); !known {
			p.handoffs = append(p.handoffs, handoff{from: m.From, to: m.To, until: now.Add(2 * p.cfg.RefreshInterval)})
		}
	}
	var in []*record
	for _, key := range sortedKeys(p.records) {
		r := p.records[key]
		if r.pos == m.To || nid.InOpen(r.pos, m.From, m.To) {
			in = append(in, r)
		}
	}
	p.sendRecords(from, m.ID, in, now)
}

// sendRecords sends copies of recs in as few messages as fit, numbered so
// that the receiver can tell when it has them all.
func (p *Participant) sendRecords(to nid.ID, id uint64, recs []*record, now time.Time) {
	var batches [][]wireRecord
	size := 0
	for _, r := range recs {
		w := r.wire(now)
		n := recordLen(&w)
		if len(batches) == 0 || size+n > p.cfg.MaxMessageLen-16 {
			batches = append(batches, nil)
			size = 0
		}
		batches[len(batches)-1] = append(batches[len(batches)-1], w)
		size += n
	}
	if len(batches) == 0 {
		batches = append(batches, nil)
	}
	for i, b := range batches {
		p.send(to, true, &message{Type: msgRecords, ID: id, Seq: uint16(i), Total: uint16(len(batches)), Records: b})
	}
}

func (p *Participant) handleRecords(from nid.ID, m *message, now time.Time) {
	for i := range m.Records {
		p.merge(&m.Records[i], now)
	}
	if m.ID == 0 {
		return
	}
	for i, s := range p.syncs {
		if s.id != m.ID || !slices.Contains(s.pending, from) {
			continue
		}
		got := s.got[from]
		if len(got) != int(m.Total) {
			got = make([]bool, m.Total)
			s.got[from] = got
		}
		got[m.Seq] = true
		if !slices.Contains(got, false) {
			s.pending = slices.DeleteFunc(s.pending, func(id nid.ID) bool { return id == from })
		}
		if len(s.pending) == 0 {
			p.syncs = slices.Delete(p.syncs, i, i+1)
			p.releaseDeferred(now)
		}
		return
	}
}

// sendDigest lists the versions of this node's arc to a replica.
func (p *Participant) sendDigest(to nid.ID, now time.Time) {
	per := (p.cfg.MaxMessageLen - 4) / (nid.Size + 8)
	var entries []digestEntry
	flush := func() {
		p.send(to, true, &message{Type: msgDigest, Digest: entries})
		entries = entries[:0]
	}
	for _, key := range sortedKeys(p.records) {
		r := p.records[key]
		if !p.isPrimary(r.pos) {
			continue
		}
		r.refreshed = now
		entries = append(entries, digestEntry{Pos: r.pos, Version: r.version})
		if len(entries) == per {
			flush()
		}
	}
	if len(entries) > 0 {
		flush()
	}
}

// handleDigest asks the primary for what this replica lacks and pushes
// back what it has newer.
func (p *Participant) handleDigest(from nid.ID, m *message, now time.Time) {
	var wants []nid.ID
	var newer []*record
	for _, e := range m.Digest {
		r := p.byPos[e.Pos]
		switch {
		case r == nil || r.version < e.Version:
			wants = append(wants, e.Pos)
		case r.version == e.Version:
			r.refreshed = now
		default:
			newer = append(newer, r)
		}
	}
	if len(wants) > 0 {
		p.send(from, true, &message{Type: msgWant, Wants: wants})
	}
	if len(newer) > 0 {
		p.sendRecords(from, 0, newer, now)
	}
}

func (p *Participant) handleWant(from nid.ID, m *message, now time.Time) {
	var recs []*record
	for _, pos := range m.Wants {
		if r := p.byPos[pos]; r != nil {
			recs = append(recs, r)
		}
	}
	if len(recs) > 0 {
		p.sendRecords(from, 0, recs, now)
	}
}

// sweep forgets dead records after Grace, copies no primary refreshed
// for StaleAfter, and old cached answers.
func (p *Participant) sweep(now time.Time) {
	for _, key := range sortedKeys(p.records) {
		r := p.records[key]
		if ks := p.keys[key]; ks != nil && ks.round != nil {
			continue
		}
		if p.isPrimary(r.pos) {
			r.refreshed = now
		}
		if !r.live(now) && !now.Before(r.expires.Add(p.cfg.Grace)) || now.Sub(r.refreshed) > p.cfg.StaleAfter {
			p.drop(r)
		}
	}
	for len(p.answerLog) > 0 {
		k := p.answerLog[0]
		if a := p.answers[k]; a != nil && now.Before(a.until) {
			break
		}
		delete(p.answers, k)
		p.answerLog = p.answerLog[1:]
	}
}

// leave hands this node's arc to its successor.
func (p *Participant) leave(now time.Time) {
	succ := p.env.Successors(1)
	if len(succ) == 0 {
		return
	}
	var recs []*record
	for _, key := range sortedKeys(p.records) {
		if r := p.records[key]; p.isPrimary(r.pos) {
			recs = append(recs, r)
		}
	}
	if len(recs) > 0 {
		p.sendRecords(succ[0], 0, recs, now)
	}
}
