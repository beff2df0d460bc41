package bench

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"burrow/netlab/cluster"
	"burrow/nid"
	"burrow/node"
	"burrow/runtime"
)

// watchedRing is three nodes and a way to make readings of them: joined
// says, per node, whether its status reads joined, or nil for a status
// that cannot be read; every reading is taken at since + at.
func watchedRing() (nodes []*cluster.Node, reading func(at time.Duration, joined ...*bool) cluster.RingSnapshot, since time.Time) {
	nodes = []*cluster.Node{{Name: "a", ID: nid.ID{1}}, {Name: "b", ID: nid.ID{2}}, {Name: "c", ID: nid.ID{3}}}
	since = time.Unix(1763771234, 0)
	reading = func(at time.Duration, joined ...*bool) cluster.RingSnapshot {
		var s cluster.RingSnapshot
		for i, n := range nodes {
			p := cluster.Place{Node: n, ReadAt: since.Add(at), Successor: nodes[(i+1)%3], Predecessor: nodes[(i+2)%3], Err: errors.New("refused")}
			if joined[i] != nil {
				p.Status, p.Err = &runtime.Status{Status: node.Status{Overlay: node.OverlayStatus{Joined: *joined[i]}}}, nil
			}
			s.Places = append(s.Places, p)
		}
		return s
	}
	return nodes, reading, since
}

func TestRingWatchRecordsJoinsAndFalls(t *testing.T) {
	yes, no := new(true), new(false)
	nodes, reading, since := watchedRing()
	w := newRingWatch(nodes, since, time.Minute)
	s := time.Second
	w.record(reading(1*s, yes, yes, nil), 10*time.Millisecond) // c cannot be read: no news
	w.record(reading(2*s, no, yes, yes), 10*time.Millisecond)  // a falls, c joins: still 2
	w.record(reading(3*s, no, no, yes), 10*time.Millisecond)   // b falls: 1
	w.record(reading(4*s, yes, yes, yes), 10*time.Millisecond) // all
	c := w.c
	if !slices.Equal(c.JoinedAfter, []time.Duration{1 * s, 1 * s, 2 * s}) {
		t.Errorf("joined after %v", c.JoinedAfter)
	}
	if len(c.Unjoined) != 2 || !strings.HasPrefix(c.Unjoined[0], "at 2.000 s a (01000000): not joined") || !strings.HasPrefix(c.Unjoined[1], "at 3.000 s b (02000000)") {
		t.Errorf("unjoined %q", c.Unjoined)
	}
	if !slices.Equal(c.Drops, []joinedDrop{{At: 3 * s, From: 2, To: 1}}) {
		t.Errorf("drops %v", c.Drops)
	}
	if c.AllJoinedAfter != 4*s || len(c.SnapshotTimes) != 4 {
		t.Errorf("all joined after %v, %d readings", c.AllJoinedAfter, len(c.SnapshotTimes))
	}
}

// After churn only the restarted nodes' joins are timed.
func TestRingWatchTimesOnlyNewcomers(t *testing.T) {
	yes := new(true)
	nodes, reading, since := watchedRing()
	w := newRingWatch(nodes[2:], since, time.Minute)
	w.record(reading(time.Second, yes, yes, nil), 0)
	w.record(reading(2*time.Second, yes, yes, yes), 0)
	if !slices.Equal(w.c.JoinedAfter, []time.Duration{2 * time.Second}) || w.c.Newcomers != 1 {
		t.Errorf("joined after %v of %d newcomers", w.c.JoinedAfter, w.c.Newcomers)
	}
	if got := joinedSpread(w.c); got != "2.000 / 2.000 / 2.000" {
		t.Errorf("spread %q", got)
	}
}

func TestFormationTableSaysWhatDidNotHappen(t *testing.T) {
	ms := time.Millisecond
	results := []*FormationResult{
		{Nodes: 3, StartedWithin: 668 * ms, Formation: &convergence{
			Newcomers: 3, JoinedAfter: []time.Duration{825 * ms, 1200 * ms, 2191 * ms}, AllJoinedAfter: 2191 * ms,
			ConsistentAfter: 24777 * ms, Limit: 4 * time.Minute,
			Drops:         []joinedDrop{{At: 6204 * ms, From: 3, To: 2}},
			SnapshotTimes: []time.Duration{5 * ms, 9 * ms, 40 * ms},
		}},
		{Nodes: 256, StartedWithin: 5 * time.Second, Formation: &convergence{
			Newcomers: 256, JoinedAfter: []time.Duration{time.Second}, Limit: 4 * time.Minute,
			Misplaced: []string{"n3 (…)", "n9 (…)"}, SnapshotTimes: []time.Duration{time.Second},
		}},
		{Nodes: 1024, Skipped: "does not fit"},
	}
	want := "| nodes | all started within (s) | joined (s) min / median / max | all joined (s) | ring consistent (s) | joined count went down | one reading (s) min / median / max |\n" +
		"| --- | --- | --- | --- | --- | --- | --- |\n" +
		"| 3 | 0.668 | 0.825 / 1.200 / 2.191 | 2.191 | 24.777 | once: 3 → 2 at 6.204 s | 0.005 / 0.009 / 0.040 |\n" +
		"| 256 | 5.000 | 1.000 / 1.000 / 1.000 (1 of 256 joined) | not all within 4m0s | **not consistent after 4m0s** (2 misplaced) | never | 1.000 / 1.000 / 1.000 |\n"
	if got := formationTable(results); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if got := formationDetails(results[2]); got != "\n1024 daemons:\n\n- skipped: does not fit\n" {
		t.Errorf("details %q", got)
	}
	if got := formationDetails(results[1]); !strings.Contains(got, "- misplaced 4m0s after the start:\n  - n3 (…)\n  - n9 (…)\n") {
		t.Errorf("details %q", got)
	}
}

func TestEvenSample(t *testing.T) {
	items := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	if got := evenSample(items, 4); !slices.Equal(got, []int{0, 2, 5, 7}) {
		t.Errorf("sample %v", got)
	}
	if got := evenSample(items, 20); len(got) != 10 {
		t.Errorf("sample of more than there are: %v", got)
	}
}

func TestDaemonGrowthFlags(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		d    daemonGrowth
		grew bool
	}{
		{daemonGrowth{RSSStart: 17 * mib, RSSEnd: 19 * mib, FilesStart: 12, FilesEnd: 13}, false},
		{daemonGrowth{RSSStart: 17 * mib, RSSEnd: 30 * mib, FilesStart: 12, FilesEnd: 12}, true},
		{daemonGrowth{RSSStart: 2 * mib, RSSEnd: 5 * mib, FilesStart: 12, FilesEnd: 12}, false}, // small in bytes
		{daemonGrowth{RSSStart: 17 * mib, RSSEnd: 17 * mib, FilesStart: 12, FilesEnd: 20}, true},
		{daemonGrowth{Restarted: true, RSSStart: 17 * mib, RSSEnd: 30 * mib, FilesStart: 12, FilesEnd: 20}, false},
	} {
		if got := c.d.grew(); got != c.grew {
			t.Errorf("%+v: grew %v, want %v", c.d, got, c.grew)
		}
	}
}

func TestFormationOptionsAreChecked(t *testing.T) {
	good := FormationOptions{Sizes: []int{32}, Limit: time.Minute, Sample: 8, Quiet: time.Minute, Soak: time.Minute, SoakEvery: 10 * time.Second}
	if err := good.validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []func(*FormationOptions){
		func(o *FormationOptions) { o.Sizes = nil },
		func(o *FormationOptions) { o.Sizes = []int{32, 1} },
		func(o *FormationOptions) { o.Sizes = []int{70000} },
		func(o *FormationOptions) { o.Limit = 0 },
		func(o *FormationOptions) { o.Sample = 0 },
		func(o *FormationOptions) { o.SoakEvery = time.Second },
	} {
		o := good
		bad(&o)
		if err := o.validate(); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

func TestSoakTableSummarizesLongLivedDaemons(t *testing.T) {
	const mib = 1 << 20
	s := time.Second
	res := &FormationResult{Nodes: 3, Soak: &soakResult{
		Kills: 6, Readings: 120, Consistent: 50, MinJoined: 2, BackAfter: []time.Duration{s, 2 * s}, NotBack: 4,
		Final: &convergence{ConsistentAfter: 3 * s},
		Daemons: []daemonGrowth{
			{Name: "n0", RSSStart: 17 * mib, RSSEnd: 18 * mib, FilesStart: 12, FilesEnd: 12},
			{Name: "n1", RSSStart: 17 * mib, RSSEnd: 40 * mib, FilesStart: 12, FilesEnd: 13},
			{Name: "n2", Restarted: true, RSSStart: 17 * mib, RSSEnd: 15 * mib, FilesStart: 12, FilesEnd: 11},
		},
	}}
	got := soakTable([]*FormationResult{res})
	want := "| 3 | 6 | 50 of 120 | 2 | 1.000 / 1.500 / 2.000 | 4 | 3.000 | 2: 17.0 / 17.0 / 17.0 → 18.0 / 29.0 / 40.0 | 12 / 12 / 12 → 12 / 12 / 13 | 1 |\n"
	if !strings.HasSuffix(got, want) {
		t.Errorf("got\n%s\nwant a row\n%s", got, want)
	}
	if details := formationDetails(res); !strings.Contains(details, "- grew during the soak:\n  - n1: RSS 17.0 → 40.0 MiB, open files 12 → 13\n") {
		t.Errorf("details %q", details)
	}
}

func TestPhasesTableCountsWhoDidNotGetThere(t *testing.T) {
	results := []*FormationResult{
		{Nodes: 4, Phases: &joinPhases{
			FirstLink: []float64{0.1, 0.2, 0.3, 0.4}, Joined: []float64{0.2, 0.3, 0.4, 0.5},
			Settled: []float64{1, 2, 3}, Read: 4, Unjoins: 1,
		}},
		{Nodes: 8},
	}
	want := "| nodes | statuses read | first link (s) median / p90 / max | joined (s) median / p90 / max | settled (s) median / p90 / max | all long links (s) median / p90 / max | unjoins, all daemons |\n" +
		"| --- | --- | --- | --- | --- | --- | --- |\n" +
		"| 4 | 4 | 0.20 / 0.40 / 0.40 | 0.30 / 0.50 / 0.50 | 2.00 / 3.00 / 3.00 (3 of 4) | none of 4 | 1 |\n"
	if got := phasesTable(results); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if got := phasesTable(results[1:]); got != "" {
		t.Errorf("no phases read: got %q", got)
	}
}
