package dht

import (
	"bytes"
	"slices"
	"time"

	"burrow/nid"
)

// request is a client operation as its primary sees it.
type request struct {
	msg message
	pos nid.ID
	ttl time.Duration
	// checked is set once the replicas confirmed they know nothing newer
	// than the local copy, so that an answer read from it is current.
	checked bool
}

func requestFromMessage(m *message, now time.Time) *request {
	return &request{msg: *m, pos: Position(m.Key), ttl: time.Duration(m.TTL) * time.Millisecond}
}

// keyState serializes operations on one key at its primary: at most one
// round with the replicas is in flight, the rest queue behind it.
type keyState struct {
	round     *round
	queue     []*request
	maxIssued uint64 // highest version this node gave the key
}

// round is a write sent to the replicas, or a check that they know
// nothing newer than the local copy.
type round struct {
	id        uint64
	req       *request // nil for a repair after a conflict
	rec       *record  // the write; nil for a check
	base      uint64   // the version the write replaces, or the one checked
	key       string
	targets   []nid.ID
	acked     []nid.ID
	nextRetry time.Time
	deadline  time.Time
}

// answerKey names a request for the retry cache.
type answerKey struct {
	origin nid.ID
	id     uint64
}

type answer struct {
	status Status
	rec    *record   // as written; nil for none
	until  time.Time // when the cache forgets it
}

func (p *Participant) handleRequest(r *request, now time.Time) {
	if !p.isPrimary(r.pos) {
		p.forward(r)
		return
	}
	if p.syncingPos(r.pos) {
		if len(p.deferred) < maxDeferred && !slices.ContainsFunc(p.deferred, r.same) {
			p.deferred = append(p.deferred, r)
		}
		return
	}
	if a := p.answers[answerKey{r.msg.Origin, r.msg.ID}]; a != nil {
		p.respond(r, a.status, a.rec, now)
		return
	}
	st := p.checkRequest(r.msg.Op, r.msg.Key, r.msg.Value, r.ttl)
	if st == OK {
		st = p.authorize(r, now)
	}
	if st != OK {
		p.respond(r, st, nil, now)
		return
	}
	r.ttl = min(r.ttl, p.cfg.MaxTTL)
	ks := p.keys[r.msg.Key]
	if ks != nil && ks.round != nil {
		if (ks.round.req != nil && r.same(ks.round.req)) || slices.ContainsFunc(ks.queue, r.same) {
			return // a retry of what is already in hand
		}
		if len(ks.queue) >= maxQueued {
			p.respond(r, Busy, nil, now)
			return
		}
		ks.queue = append(ks.queue, r)
		return
	}
	p.execute(r, now)
}

func (r *request) same(o *request) bool {
	return r.msg.ID == o.msg.ID && r.msg.Origin == o.msg.Origin
}

// forward passes a request on when this node is not its primary.
func (p *Participant) forward(r *request) {
	if r.msg.Hops == 0 {
		return
	}
	r.msg.Hops--
	p.stats.Forwarded++
	p.route(r.pos, &r.msg)
}

// execute runs r against the local copy. Writes go on to the replicas;
// answers read from the copy first check with the replicas that it is
// current, because a primary that just took over an arc may not have
// heard of writes its predecessor in that role accepted meanwhile.
func (p *Participant) execute(r *request, now time.Time) {
	rec := p.records[r.msg.Key]
	live := rec != nil && rec.live(now)
	origin := r.msg.Origin
	certified := p.selfCertifying(r.msg.Key)
	if certified && r.msg.Op != opGet {
		switch {
		case r.msg.Op == opDelete || r.msg.Op == opRenew:
			p.respond(r, Denied, nil, now) // final; a write of the same value renews it
			return
		case !p.validValue(r.msg.Key, false, r.msg.Value):
			p.respond(r, Unproven, nil, now)
			return
		}
	}
	shared := false
	if p.cfg.Shared != nil && r.msg.Op != opGet {
		var allowed bool
		var writer [32]byte
		if r.msg.Proof != nil {
			writer = r.msg.Proof.Key
		}
		if shared, allowed = p.cfg.Shared(r.msg.Key, r.msg.Cert, writer, now); shared && !allowed {
			p.respond(r, Denied, nil, now)
			return
		}
	}
	answer := func(st Status, found *record) {
		if !r.checked {
			p.check(r, rec, now)
			return
		}
		p.respond(r, st, found, now)
	}
	switch r.msg.Op {
	case opGet:
		if !live {
			answer(NotFound, nil)
			return
		}
		answer(OK, rec)
		return
	case opPutIfAbsent:
		if live {
			st := Exists
			if (rec.owner == origin || certified) && bytes.Equal(rec.value, r.msg.Value) {
				st = OK // the same owner asking again (a retry, or a restart), or the same statement
			}
			answer(st, rec)
			return
		}
	case opPut:
		switch {
		case live && certified && !bytes.Equal(rec.value, r.msg.Value):
			answer(Exists, rec)
			return
		case live && rec.owner != origin && !shared && !certified:
			answer(Denied, rec)
			return
		}
	case opDelete, opRenew:
		if !live {
			answer(NotFound, nil)
			return
		}
		if rec.owner != origin && !shared {
			answer(Denied, rec)
			return
		}
	}
	switch {
	case rollsBack(rec, origin, r.msg.Proof):
		p.stats.Forged++ // an old request of the owner's, replayed
		p.respond(r, Unproven, nil, now)
		return
	case rec == nil && len(p.records) >= p.cfg.MaxRecords:
		p.respond(r, Full, nil, now)
		return
	case !live && r.msg.Op != opDelete && !certified && p.overQuota(origin, now):
		p.respond(r, OverQuota, nil, now)
		return
	}
	next := &record{key: r.msg.Key, pos: r.pos, owner: origin, value: r.msg.Value, expires: now.Add(r.ttl), proof: r.msg.Proof}
	switch {
	case r.msg.Op == opDelete:
		next.value, next.dead, next.expires = nil, true, now
		if next.proof != nil {
			// The tombstone outlives the lease it ends, so that no one can
			// replay the owner's last write within it.
			next.expires = later(now, rec.expires)
		}
	case r.msg.Op == opRenew && next.proof == nil:
		next.value = rec.value
	case next.proof != nil && next.expires.After(signedEnd(next.proof)):
		next.expires = signedEnd(next.proof)
	}
	p.write(r, next, now)
}

// write stores rec under a fresh version and replicates it. req is the
// operation to answer once the replicas stored it, nil for a repair.
func (p *Participant) write(req *request, rec *record, now time.Time) {
	ks := p.keyState(rec.key)
	var base uint64
	if old := p.records[rec.key]; old != nil {
		base = old.version
	}
	base = max(base, ks.maxIssued)
	rec.version = p.newVersion(base, now)
	ks.maxIssued = rec.version
	rec.refreshed = now
	p.store(rec)
	p.startRound(ks, req, rec, base, now)
}

// check asks the replicas whether they know a version of r's key newer
// than local (nil: none), then runs r again.
func (p *Participant) check(r *request, local *record, now time.Time) {
	var base uint64
	if local != nil {
		base = local.version
	}
	p.startRound(p.keyState(r.msg.Key), r, nil, base, now)
}

func (p *Participant) startRound(ks *keyState, req *request, rec *record, base uint64, now time.Time) {
	p.nextID++
	rd := &round{
		id:        p.nextID,
		req:       req,
		rec:       rec,
		base:      base,
		targets:   p.replicaTargets(),
		nextRetry: now.Add(p.cfg.RetryInterval),
		deadline:  now.Add(p.cfg.RequestTimeout),
	}
	if req != nil {
		rd.key = req.msg.Key
	} else {
		rd.key = rec.key
	}
	ks.round = rd
	for _, t := range rd.targets {
		p.sendRound(t, rd, now)
	}
	p.maybeComplete(ks, now)
}

func (p *Participant) keyState(key string) *keyState {
	ks := p.keys[key]
	if ks == nil {
		ks = &keyState{}
		p.keys[key] = ks
	}
	return ks
}

// newVersion is a hybrid logical clock reading above base.
func (p *Participant) newVersion(base uint64, now time.Time) uint64 {
	v := uint64(max(now.UnixMilli(), 0)) << 16
	return max(v, base+1)
}

// replicaTargets are the successors that hold copies of this node's arc.
func (p *Participant) replicaTargets() []nid.ID {
	succ := p.env.Successors(p.cfg.Replicas - 1)
	out := make([]nid.ID, 0, len(succ))
	for _, s := range succ {
		if s != p.self && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func (p *Participant) sendRound(to nid.ID, rd *round, now time.Time) {
	m := message{ID: rd.id, Base: rd.base}
	if rd.rec != nil {
		m.Type, m.Records = msgReplicate, []wireRecord{rd.rec.wire(now)}
	} else {
		m.Type, m.Key = msgCheck, rd.key
	}
	p.send(to, true, &m)
}

// maybeComplete ends the round once no replica is left to hear from.
func (p *Participant) maybeComplete(ks *keyState, now time.Time) {
	rd := ks.round
	for _, t := range rd.targets {
		if !slices.Contains(rd.acked, t) {
			return
		}
	}
	p.completeRound(ks, OK, now)
}

// completeRound ends the key's round with st: a write is answered, a
// checked request runs again to answer from the confirmed copy. Then the
// next queued operation starts.
func (p *Participant) completeRound(ks *keyState, st Status, now time.Time) {
	rd := ks.round
	ks.round = nil
	switch {
	case rd.req == nil:
	case st != OK:
		p.respond(rd.req, st, nil, now)
	case rd.rec == nil:
		rd.req.checked = true
		if rd.req.msg.Op == opGet {
			// The reads queued behind a read's check share it: no write
			// ran in between. One check per read made a key every node
			// reads (the network's settings) answer one read per round
			// trip: after a cold start of 10,000 nodes its primary was
			// busy for minutes, and every refused read came back.
			for _, q := range ks.queue {
				if q.msg.Op != opGet {
					break
				}
				q.checked = true
			}
		}
		ks.queue = slices.Insert(ks.queue, 0, rd.req)
	default:
		p.respond(rd.req, OK, rd.rec, now)
		p.remember(rd.req, OK, rd.rec, now)
	}
	p.drainKey(rd.key, ks, now)
}

// drainKey runs queued operations until one starts a round.
func (p *Participant) drainKey(key string, ks *keyState, now time.Time) {
	for ks.round == nil && len(ks.queue) > 0 {
		r := ks.queue[0]
		ks.queue = ks.queue[1:]
		p.handleRequest(r, now)
	}
	if ks.round == nil && len(ks.queue) == 0 {
		delete(p.keys, key)
	}
}

// respond answers r's origin, or completes the local client operation,
// with the record the answer is about: its value, owner, lease and proof
// (a deletion's answer has the owner and proof only), or only its owner
// (Denied), or nothing.
func (p *Participant) respond(r *request, st Status, rec *record, now time.Time) {
	m := message{Type: msgResponse, ID: r.msg.ID, Status: st}
	if rec != nil {
		m.Owner = rec.owner
		if st != Denied {
			m.Proof = rec.proof
		}
		if st != Denied && !rec.dead {
			m.Value, m.Remaining = rec.value, remainingMillis(rec.expires, now)
		}
	}
	if r.msg.Origin == p.self {
		m.Value = slices.Clone(m.Value)
		p.handleResponse(&m, now)
		return
	}
	p.send(r.msg.Origin, true, &m)
}

// remember caches a write's answer so that a retry of the request gets it
// again instead of running twice.
func (p *Participant) remember(r *request, st Status, rec *record, now time.Time) {
	k := answerKey{r.msg.Origin, r.msg.ID}
	if _, ok := p.answers[k]; ok {
		return
	}
	if len(p.answerLog) >= p.cfg.MaxRecords {
		delete(p.answers, p.answerLog[0])
		p.answerLog = p.answerLog[1:]
	}
	p.answers[k] = &answer{status: st, rec: rec, until: now.Add(p.cfg.RequestTimeout)}
	p.answerLog = append(p.answerLog, k)
}

func (p *Participant) handleReplicaAck(from nid.ID, m *message, now time.Time) {
	ks := p.keys[m.Key]
	if ks == nil || ks.round == nil || ks.round.id != m.ID || !slices.Contains(ks.round.targets, from) {
		return // an answer to a retry of a round that is over
	}
	rd := ks.round
	switch m.Status {
	case OK:
		if !slices.Contains(rd.acked, from) {
			rd.acked = append(rd.acked, from)
		}
		p.maybeComplete(ks, now)
	case conflict:
		if len(m.Records) == 1 && m.Records[0].Key == m.Key && p.verifiedCopy(&m.Records[0]) {
			p.resolveConflict(ks, &m.Records[0], now)
		}
	case Full:
		p.completeRound(ks, Full, now)
	}
}

// resolveConflict adopts a copy that a replica (or a sync) showed to be
// newer than what this primary based its pending write on: the copy is
// stored under a version above everything issued, replicated as a repair,
// and the interrupted operation runs again after it against the copy.
func (p *Participant) resolveConflict(ks *keyState, theirs *wireRecord, now time.Time) {
	p.stats.Conflicts++
	rd := ks.round
	if rd.req != nil {
		rd.req.checked = false
		ks.queue = slices.Insert(ks.queue, 0, rd.req)
	}
	ks.round = nil
	// Base the repair on their version too, so that the replica holding
	// it accepts the repair even when its clock runs ahead of ours.
	ks.maxIssued = max(ks.maxIssued, theirs.Version)
	p.write(nil, recordFromWire(theirs, now), now)
}

// retryRounds resends to replicas that have not answered and gives up on
// rounds past their deadline. A write given up on stays stored here and
// reaches the replicas through maintenance, but the client hears Timeout.
func (p *Participant) retryRounds(now time.Time) {
	for _, key := range sortedKeys(p.keys) {
		ks := p.keys[key]
		rd := ks.round
		if rd == nil {
			continue
		}
		if !now.Before(rd.deadline) {
			p.completeRound(ks, Timeout, now)
			continue
		}
		if now.Before(rd.nextRetry) {
			continue
		}
		rd.nextRetry = now.Add(p.cfg.RetryInterval)
		for _, t := range rd.targets {
			if !slices.Contains(rd.acked, t) {
				p.sendRound(t, rd, now)
			}
		}
	}
}

// retargetRounds moves rounds in flight to the current replica set: new
// successors are asked too, departed ones are no longer waited for.
func (p *Participant) retargetRounds(now time.Time) {
	targets := p.replicaTargets()
	for _, key := range sortedKeys(p.keys) {
		ks := p.keys[key]
		rd := ks.round
		if rd == nil {
			continue
		}
		for _, t := range targets {
			if !slices.Contains(rd.targets, t) {
				p.sendRound(t, rd, now)
			}
		}
		rd.targets = slices.Clone(targets)
		p.maybeComplete(ks, now)
	}
}

// handleReplicate stores a write from a primary, unless this node knows a
// version newer than the one the write replaces: then it answers with its
// copy so that the primary learns what it missed.
func (p *Participant) handleReplicate(from nid.ID, m *message, now time.Time) {
	in := &m.Records[0]
	if len(in.Key) > p.cfg.MaxKeyLen || len(in.Value) > p.cfg.MaxValueLen {
		return
	}
	ack := message{Type: msgReplicaAck, ID: m.ID, Status: OK, Key: in.Key}
	local := p.records[in.Key]
	switch {
	case local != nil && local.version == in.Version && local.sameContent(in):
		local.expires = later(local.expires, anchor(in.Remaining, now))
		local.refreshed = now
	case (local == nil || local.version <= m.Base) && p.mayWriteLocally(in.Key):
		if local == nil && len(p.records) >= p.hardCap() {
			ack.Status = Full
			break
		}
		if !p.verifiedCopy(in) {
			return
		}
		rec := recordFromWire(in, now)
		p.store(rec)
	default:
		ack.Status = conflict
		if local != nil {
			ack.Records = []wireRecord{local.wire(now)}
		}
	}
	p.send(from, true, &ack)
}

// handleCheck answers a primary about to answer from its copy: OK when
// this node knows nothing newer than base, its own copy otherwise.
func (p *Participant) handleCheck(from nid.ID, m *message, now time.Time) {
	ack := message{Type: msgReplicaAck, ID: m.ID, Status: OK, Key: m.Key}
	if local := p.records[m.Key]; local != nil && (local.version > m.Base || !p.mayWriteLocally(m.Key)) {
		ack.Status = conflict
		ack.Records = []wireRecord{local.wire(now)}
	}
	p.send(from, true, &ack)
}

// mayWriteLocally is false while this node has its own write of key in
// flight: another node believes it is primary too, and must learn ours.
func (p *Participant) mayWriteLocally(key string) bool {
	ks := p.keys[key]
	return ks == nil || ks.round == nil || ks.round.rec == nil
}

// hardCap bounds copies taken from other nodes.
func (p *Participant) hardCap() int { return 4 * p.cfg.MaxRecords }
