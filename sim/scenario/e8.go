package scenario

import (
	"fmt"
	"slices"
	"time"

	"burrow/sim"
)

const (
	e8N         = 32
	e8Flows     = 3
	e8JoinEvery = 10 * time.Second // the paper booted the second half 60 s apart
	e8Churned   = 8
	e8ChurnStep = 15 * time.Second // as the paper: one event every 15 s
)

func runE8(o Options) (*Result, error) {
	r := newResult("e8", "E8: probe flows through joins and churn (n=32, s=2, k=2)", o)
	var progress func(sim.Progress)
	if o.Progress != nil {
		progress = func(p sim.Progress) { o.Progress("e8", e8N, p) }
	}
	s := sim.New(sim.Config{Seed: o.Seed, Progress: progress})
	nodes := make([]*sim.Node, e8N)
	for i := range nodes {
		nodes[i] = s.AddNode(uniform(2, 2, false)(i))
	}
	// Half the nodes boot and converge.
	half := e8N / 2
	s.StartStaggered(nodes[:half], joinEvery, 1)
	s.RunFor(time.Duration(half) * joinEvery)
	_, err := s.Converge(convergeLimit(half), convergeStable)
	r.check("first half convergence", err)
	// Flows between nodes of the first half without a direct link.
	rng := s.Rand()
	var flows []*sim.Flow
	endpoints := map[int]bool{}
	for len(flows) < e8Flows {
		a, b := rng.IntN(half), rng.IntN(half)
		if a == b || endpoints[a] || endpoints[b] || slices.Contains(nodes[a].Core().Adjacency(), nodes[b].ID) {
			continue
		}
		endpoints[a], endpoints[b] = true, true
		flows = append(flows, s.AddFlow(sim.FlowConfig{Kind: sim.Probes, Src: a, Dst: b, Every: probeInterval, Start: s.Elapsed()}))
	}
	phases := []time.Duration{s.Elapsed()}
	// The second half joins, one node every e8JoinEvery.
	s.StartStaggered(nodes[half:], e8JoinEvery, 1)
	s.RunFor(time.Duration(e8N-half) * e8JoinEvery)
	phases = append(phases, s.Elapsed())
	// Churn: random nodes other than the flows' ends leave — silently or
	// gracefully, alternately — and come back, one event every 15 s.
	var candidates []int
	for i := range nodes {
		if !endpoints[i] {
			candidates = append(candidates, i)
		}
	}
	rng.Shuffle(len(candidates), func(i, j int) { candidates[i], candidates[j] = candidates[j], candidates[i] })
	var events []string
	for k, i := range candidates[:e8Churned] {
		n := nodes[i]
		how := "killed"
		if k%2 == 0 {
			how = "left gracefully"
			n.Stop()
		} else {
			n.Kill()
		}
		events = append(events, fmt.Sprintf("%v %s %s", s.Elapsed().Round(time.Second), n.Name, how))
		s.RunFor(e8ChurnStep)
		n.Start()
		events = append(events, fmt.Sprintf("%v %s restarted", s.Elapsed().Round(time.Second), n.Name))
		s.RunFor(e8ChurnStep)
	}
	phases = append(phases, s.Elapsed())
	s.RunFor(30 * time.Second)
	for _, f := range flows {
		f.StopFlow()
	}
	s.RunFor(2 * time.Second)
	t := r.table("flows", "Probes every 100 ms while the second half joins and 8 nodes leave and return",
		"flow", "phase", "probes", "delivered %", "lost", "outages", "longest interruption")
	names := []string{"joins", "churn"}
	for _, f := range flows {
		label := fmt.Sprintf("%s→%s", nodes[f.Src].Name, nodes[f.Dst].Name)
		for p := range names {
			probes := window(f.Probes, phases[p], phases[p+1])
			o := outageOf(probes, phases[p])
			t.Add(label, names[p], len(probes), 100*float64(len(probes)-o.lost)/float64(max(len(probes), 1)), o.lost, outages(probes), o.longest)
		}
	}
	r.Data["churn_events"] = events
	inv := invariants(r, "after churn", s)
	r.Data["invariants"] = inv
	r.note("joins: the second half of the nodes boots %v apart (the paper: 60 s); churn: %d nodes other than the flows' ends leave, alternately silently and with Leave, and restart, one event every %v as in the paper", e8JoinEvery, e8Churned, e8ChurnStep)
	r.note("paper (E8): with iperf flows running, throughput fluctuated but no transmission failed or timed out")
	return r, r.Err()
}

// window returns the probes sent in [from, to).
func window(probes []sim.Probe, from, to time.Duration) []sim.Probe {
	var out []sim.Probe
	for _, p := range probes {
		if p.Sent >= from && p.Sent < to {
			out = append(out, p)
		}
	}
	return out
}

// outages counts the runs of consecutive unanswered probes.
func outages(probes []sim.Probe) int {
	c := 0
	for i, p := range probes {
		if p.Replied < 0 && (i == 0 || probes[i-1].Replied >= 0) {
			c++
		}
	}
	return c
}
