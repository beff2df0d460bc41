package dht

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"burrow/nid"

	"pgregory.net/rapid"
)

func genNID(t *rapid.T, label string) nid.ID {
	return nid.ID(rapid.SliceOfN(rapid.Byte(), nid.Size, nid.Size).Draw(t, label))
}

func genValue(t *rapid.T, label string) []byte {
	v := rapid.SliceOfN(rapid.Byte(), 0, 40).Draw(t, label)
	if len(v) == 0 {
		return nil // the decoder returns nil for empty values
	}
	return v
}

func genProof(t *rapid.T) *proof {
	if !rapid.Bool().Draw(t, "signed") {
		return nil
	}
	pr := &proof{Stamp: rapid.Uint64().Draw(t, "stamp"), Until: rapid.Uint32().Draw(t, "until")}
	copy(pr.Key[:], rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(t, "public key"))
	copy(pr.Sig[:], rapid.SliceOfN(rapid.Byte(), SignatureSize, SignatureSize).Draw(t, "signature"))
	return pr
}

func genRecord(t *rapid.T) wireRecord {
	return wireRecord{
		Key:       rapid.StringN(1, 20, 255).Draw(t, "key"),
		Owner:     genNID(t, "owner"),
		Version:   rapid.Uint64Min(1).Draw(t, "version"),
		Remaining: rapid.Uint32().Draw(t, "remaining"),
		Dead:      rapid.Bool().Draw(t, "dead"),
		Value:     genValue(t, "value"),
		Proof:     genProof(t),
	}
}

func genMessage(t *rapid.T) message {
	m := message{Type: msgType(rapid.IntRange(1, int(maxMsgType)-1).Draw(t, "type"))}
	switch m.Type {
	case msgRequest:
		m.ID, m.Origin = rapid.Uint64().Draw(t, "id"), genNID(t, "origin")
		m.Op = op(rapid.IntRange(1, int(maxOp)-1).Draw(t, "op"))
		m.Hops, m.TTL = rapid.Uint8().Draw(t, "hops"), rapid.Uint32().Draw(t, "ttl")
		m.Key, m.Value = rapid.StringN(1, 20, 255).Draw(t, "key"), genValue(t, "value")
		m.Proof, m.Cert = genProof(t), genValue(t, "certificate")
	case msgResponse:
		m.ID, m.Status = rapid.Uint64().Draw(t, "id"), Status(rapid.IntRange(0, int(maxStatus)-1).Draw(t, "status"))
		m.Owner, m.Remaining, m.Value = genNID(t, "owner"), rapid.Uint32().Draw(t, "remaining"), genValue(t, "value")
		m.Proof = genProof(t)
	case msgReplicate:
		rec := genRecord(t)
		m.ID, m.Base = rapid.Uint64().Draw(t, "id"), rapid.Uint64Max(rec.Version-1).Draw(t, "base")
		m.Records = []wireRecord{rec}
	case msgReplicaAck:
		m.ID, m.Status = rapid.Uint64().Draw(t, "id"), Status(rapid.IntRange(0, int(maxStatus)-1).Draw(t, "status"))
		m.Key = rapid.StringN(1, 20, 255).Draw(t, "key")
		if rapid.Bool().Draw(t, "with record") {
			m.Records = []wireRecord{genRecord(t)}
		}
	case msgSyncRequest:
		m.ID, m.From, m.To = rapid.Uint64().Draw(t, "id"), genNID(t, "from"), genNID(t, "to")
	case msgRecords:
		m.ID = rapid.Uint64().Draw(t, "id")
		m.Total = rapid.Uint16Min(1).Draw(t, "total")
		m.Seq = rapid.Uint16Max(m.Total-1).Draw(t, "seq")
		for range rapid.IntRange(0, 4).Draw(t, "records") {
			m.Records = append(m.Records, genRecord(t))
		}
	case msgDigest:
		for range rapid.IntRange(0, 5).Draw(t, "entries") {
			m.Digest = append(m.Digest, digestEntry{Pos: genNID(t, "pos"), Version: rapid.Uint64().Draw(t, "version")})
		}
	case msgWant:
		for range rapid.IntRange(0, 5).Draw(t, "wants") {
			m.Wants = append(m.Wants, genNID(t, "want"))
		}
	case msgCheck:
		m.ID, m.Base, m.Key = rapid.Uint64().Draw(t, "id"), rapid.Uint64().Draw(t, "base"), rapid.StringN(1, 20, 255).Draw(t, "key")
	}
	return m
}

func TestMessageRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := genMessage(t)
		b := m.append(nil)
		back, err := parseMessage(b)
		if err != nil {
			t.Fatalf("parse(append(%+v)): %v", m, err)
		}
		if !reflect.DeepEqual(back, m) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", back, m)
		}
	})
}

func TestParseRejectsEveryTruncationAndTrailingByte(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := genMessage(t)
		b := m.append(nil)
		cut := rapid.IntRange(0, len(b)-1).Draw(t, "cut")
		if _, err := parseMessage(b[:cut]); err == nil {
			t.Fatalf("accepted a message cut to %d of %d bytes", cut, len(b))
		}
		if _, err := parseMessage(append(b, 0)); err == nil {
			t.Fatal("accepted a trailing byte")
		}
	})
}

func TestParseRejectsInvalidFields(t *testing.T) {
	rec := wireRecord{Key: "k", Version: 2, Value: []byte("v")}
	valid := map[string][]byte{
		"request":   (&message{Type: msgRequest, Op: opGet, Key: "k"}).append(nil),
		"replicate": (&message{Type: msgReplicate, Base: 1, Records: []wireRecord{rec}}).append(nil),
		"records":   (&message{Type: msgRecords, Total: 1, Records: []wireRecord{rec}}).append(nil),
		"response":  (&message{Type: msgResponse, Status: NotFound}).append(nil),
	}
	for name, b := range valid {
		if _, err := parseMessage(b); err != nil {
			t.Fatalf("%s: valid message refused: %v", name, err)
		}
	}
	mutate := func(b []byte, i int, v byte) []byte {
		c := bytes.Clone(b)
		c[i] = v
		return c
	}
	bad := map[string][]byte{
		"version":                 mutate(valid["request"], 0, 1),
		"unknown proof presence":  mutate(valid["response"], len(valid["response"])-1, 2),
		"type zero":               mutate(valid["request"], 1, 0),
		"unknown type":            mutate(valid["request"], 1, byte(maxMsgType)),
		"unknown op":              mutate(valid["request"], 2+8+16, byte(maxOp)),
		"empty key":               mutate(valid["request"], 2+8+16+1+1+4, 0),
		"unknown status":          mutate(valid["response"], 2+8, byte(maxStatus)),
		"write not moving on":     (&message{Type: msgReplicate, Base: 2, Records: []wireRecord{rec}}).append(nil),
		"record version zero":     (&message{Type: msgRecords, Total: 1, Records: []wireRecord{{Key: "k"}}}).append(nil),
		"unknown record flag":     mutate(valid["replicate"], 2+8+8, 4),
		"batch beyond its total":  (&message{Type: msgRecords, Seq: 1, Total: 1}).append(nil),
		"ack with two records":    append((&message{Type: msgReplicaAck, Key: "k"}).append(nil)[:2+8+1+2], 2),
		"digest longer than sent": append((&message{Type: msgDigest}).append(nil)[:2], 0, 3),
		"too many entries":        append((&message{Type: msgWant}).append(nil)[:2], 0xff, 0xff),
	}
	for name, b := range bad {
		if m, err := parseMessage(b); err == nil {
			t.Errorf("%s: accepted %+v", name, m)
		}
	}
}

func FuzzParseMessage(f *testing.F) {
	rec := wireRecord{Key: "dhcp:10.0.0.0/24:10.0.0.7", Owner: nid.ID{1}, Version: 7 << 16, Remaining: 60000, Value: []byte("52:54:00:00:00:01 host")}
	for _, m := range []message{
		{Type: msgRequest, ID: 1, Origin: nid.ID{2}, Op: opPutIfAbsent, Hops: maxHops, TTL: 60000, Key: rec.Key, Value: rec.Value},
		{Type: msgRequest, ID: 1, Origin: nid.ID{2}, Op: opPut, Hops: maxHops, TTL: 60000, Key: rec.Key, Value: rec.Value, Proof: &proof{Key: [32]byte{3}, Stamp: 1, Until: 2}, Cert: []byte("certificate")},
		{Type: msgResponse, ID: 1, Status: OK, Owner: nid.ID{1}, Remaining: 1000, Value: []byte("v"), Proof: &proof{Key: [32]byte{3}, Stamp: 1, Until: 2}},
		{Type: msgRecords, ID: 4, Total: 1, Records: []wireRecord{{Key: "y", Version: 1, Value: []byte("v"), Proof: &proof{Key: [32]byte{4}, Stamp: 5, Until: 6}}}},
		{Type: msgResponse, ID: 1, Status: Exists, Owner: nid.ID{1}, Remaining: 1000, Value: []byte("v")},
		{Type: msgReplicate, ID: 3, Base: 1, Records: []wireRecord{rec}},
		{Type: msgReplicaAck, ID: 3, Status: conflict, Key: rec.Key, Records: []wireRecord{rec}},
		{Type: msgSyncRequest, ID: 4, From: nid.ID{1}, To: nid.ID{9}},
		{Type: msgRecords, ID: 4, Total: 2, Records: []wireRecord{rec, {Key: "x", Version: 1, Dead: true}}},
		{Type: msgDigest, Digest: []digestEntry{{Pos: Position(rec.Key), Version: 9}}},
		{Type: msgWant, Wants: []nid.ID{Position(rec.Key)}},
		{Type: msgCheck, ID: 5, Base: 9, Key: rec.Key},
	} {
		f.Add(m.append(nil))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseMessage(b)
		if err != nil {
			return
		}
		if again := m.append(nil); !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs:\n%x\n%x", again, b)
		}
	})
}

// FuzzHandleMessage feeds arbitrary payloads to a participant in a small
// ring: nothing may panic, and the ring must still serve afterwards.
func FuzzHandleMessage(f *testing.F) {
	rec := wireRecord{Key: "k", Owner: nid.ID{1}, Version: 7 << 16, Remaining: 60000, Value: []byte("v")}
	for _, m := range []message{
		{Type: msgReplicate, ID: 3, Base: 1, Records: []wireRecord{rec}},
		{Type: msgReplicaAck, ID: 3, Status: conflict, Key: "k", Records: []wireRecord{rec}},
		{Type: msgRecords, ID: 1, Total: 1, Records: []wireRecord{rec}},
		{Type: msgSyncRequest, ID: 4, From: nid.ID{1}, To: nid.ID{9}},
		{Type: msgRequest, ID: 1, Origin: nid.ID{2}, Op: opDelete, Hops: 2, Key: "k"},
		{Type: msgCheck, ID: 5, Base: 9, Key: "k"},
		{Type: msgRequest, ID: 2, Origin: nid.ID{2}, Op: opPut, Hops: 2, TTL: 60000, Key: "stated:k", Value: []byte("forged")},
		{Type: msgRecords, ID: 1, Total: 1, Records: []wireRecord{{Key: "stated:k", Owner: nid.ID{1}, Version: 8 << 16, Dead: true, Value: []byte("stated")}}},
	} {
		f.Add(m.append(nil))
	}
	cfg := testConfig()
	cfg.SelfCertifying = statedValues{}
	f.Fuzz(func(t *testing.T, b []byte) {
		r := newTestRing(t, 1, 4, cfg)
		n := r.live()[0]
		n.call(func() { n.p.HandleMessage(r.live()[1].id, b, r.now) })
		r.run(5 * time.Second)
		o := putIfAbsent(r.live()[2], "after", "v", time.Minute)
		r.wait(o)
		if o.res.Status != OK {
			t.Fatalf("ring broken after the payload: %v", o.res.Status)
		}
	})
}

// statedValues makes the keys stated:* self-certifying, holding the value
// "stated" only, so that fuzzing reaches the checks of such keys.
type statedValues struct{}

func (statedValues) Covers(key string) bool { return strings.HasPrefix(key, "stated:") }

func (statedValues) Valid(_ string, value []byte) bool { return string(value) == "stated" }
