package scenario

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"burrow/sim"
	"burrow/sim/plot"
)

// E8 (paper §5.8): TCP-like flows keep running while the overlay grows
// from half its nodes to all of them, then while nodes on the flows' paths
// fail silently or leave gracefully and come back, one event every 15 s.
const (
	e8N     = 32   // the paper's size
	e8Large = 1000 // the size --large adds
	e8Flows = 4
	// e8MinN leaves nodes to churn besides the flows' ends.
	e8MinN = 8
	// e8JoinPhase is how long the second half of the nodes takes to join:
	// one node every 10 s at 32 nodes (the paper: 60 s), every 320 ms at
	// 1,000, so that the run's length does not grow with n.
	e8JoinPhase = 160 * time.Second
	e8Churned   = 8                // nodes stopped or killed, each restarted at the next event
	e8ChurnStep = 15 * time.Second // as the paper: one event every 15 s
	e8Tail      = 30 * time.Second // the flows run on after the last restart
	// e8Warmup runs the flows before the joins start, so that the
	// measurements start with the flows' paths learned.
	e8Warmup = time.Second
	// e8TraceLead: each flow's path is traced this long before an event.
	e8TraceLead = time.Second
	// A TCP-like flow: 1,200-byte frames every 20 ms (480 kbit/s),
	// acknowledged every sim.AckEvery frames over the overlay as TCP's
	// acks are. The simulator has no bandwidth: the rate sets how finely
	// outages are measured, and what the run costs — a frame flooded
	// costs n datagrams.
	e8FrameSize  = 1200
	e8FrameEvery = 20 * time.Millisecond
	// e8InFlight: a frame lost up to this long after it was sent was still
	// on its way when an event came, and counts toward that event.
	e8InFlight = 200 * time.Millisecond
	// A flow has recovered from an event when its delivery per e8Bin is
	// back to e8RecoveredShare of its rate over e8Baseline before it.
	e8Bin            = 100 * time.Millisecond
	e8Baseline       = 5 * time.Second
	e8RecoveredShare = 0.8
	// e8ChartBin is the chart's sampling, iperf's one-second reports.
	e8ChartBin = time.Second
)

// What a churn event does to its node.
const (
	e8Stop    = "graceful stop"
	e8Kill    = "kill"
	e8Restart = "restart"
)

// e8Event is one churn event, with each flow's path traced just before.
type e8Event struct {
	at   time.Duration
	node int
	AtMS int64  `json:"at_ms"`
	Kind string `json:"kind"`
	Node string `json:"node"`
	// OnPath lists the flows (by position) whose traced path crossed the
	// node; Paths are those paths, nil where the traced frame got lost.
	OnPath []int   `json:"on_path"`
	Paths  [][]int `json:"paths"`
}

// e8Flow is a recorded bulk flow and what is needed to measure it.
type e8Flow struct {
	*sim.Flow
	label string
	// arrivals and acks are when its frames' first copies and their
	// acknowledgements arrived, sorted: a frame overtakes an earlier one
	// when its path got shorter.
	arrivals, acks []time.Duration
}

func runE8(o Options) (*Result, error) {
	r := newResult("e8", "E8: TCP-like flows through joins and churn on their paths (s=2, k=2)", o)
	phases := r.table("flows", "Each flow while the second half joins and while nodes on the flows' paths stop, die and restart",
		"n", "flow", "phase", "frames sent", "delivered %", "frames lost", "duplicates", "lost time", "longest silence", "datagrams per frame", "stops and kills on its path")
	events := r.table("events", "Each event and the flows it touched (the node was on their path, or they lost something)",
		"n", "at", "event", "node", "flow", "on its path", "frames/s before", "lost time", "longest silence", "below 80% after", "back to 80% after", "frames lost", "acks: lost time")
	sizes := map[string]any{}
	for _, n := range o.sizesWith(e8Large, e8N) {
		sizes[fmt.Sprint(n)] = runE8Size(o, r, n, phases, events)
	}
	r.Data["sizes"] = sizes
	r.note("flows: %d pairs of nodes of the first half without a direct link; each sends %d-byte frames every %v, acknowledged every %d frames over the overlay", e8Flows, e8FrameSize, e8FrameEvery, sim.AckEvery)
	r.note("joins: the second half of the nodes joins over %v (one node every 10 s at 32 nodes; the paper: every 60 s); churn: %d times a node inside a flow's current path (traced %v before; the flows in turn, never a flow's end) stops gracefully or, alternately, is killed, and restarts %v later, one event every %v as in the paper", e8JoinPhase, e8Churned, e8TraceLead, e8ChurnStep, e8ChurnStep)
	r.note("per event, until the next one: lost time is the time with nothing delivered beyond the flow's %v spacing; below 80%% is when delivery per %v first fell under 80%% of the rate over the %v before the event, back to 80%% the end of the first bin after that with 80%% again: the time to recover; frames lost are those sent from %v before the event on (still in flight when it came) and never delivered", e8FrameEvery, e8Bin, e8Baseline, e8InFlight)
	r.note("datagrams per frame: the datagrams the overlay sent on a flow's behalf (its frames over each link, its acks, probes, floods) per frame sent; a flow switched hop by hop costs about its path's length times 1.25 (an ack every %d frames), a flow whose frames are flooded to every node about n", sim.AckEvery)
	r.note("paper (E8, n=32): with iperf flows running, throughput fluctuated but no transmission failed or timed out")
	return r, r.Err()
}

// e8Run is one run of E8: its flows, its events, and when its phases
// started, with what the overlay had sent for each flow by then.
type e8Run struct {
	n                        int
	flows                    []*e8Flow
	evs                      []e8Event
	joinsStart, churnStart   time.Duration
	stop                     time.Duration // the flows stopped
	atJoins, atChurn, atStop []sim.Traffic
}

// runE8Size runs E8 on n nodes, adds its rows to the tables and its chart
// to r, and returns its data.
func runE8Size(o Options, r *Result, n int, phases, events *Table) map[string]any {
	if n < e8MinN {
		r.check(fmt.Sprintf("e8 n=%d", n), fmt.Errorf("E8 needs at least %d nodes", e8MinN))
		return nil
	}
	half := n / 2
	s := build(o, r, "e8", spec{n: n, boot: half, node: uniform(2, 2, false)})
	flows, ends := e8StartFlows(s, half)
	if len(flows) == 0 {
		r.check(fmt.Sprintf("e8 n=%d flows", n), fmt.Errorf("every two nodes of the first %d have a direct link", half))
		return nil
	}
	run := e8Run{n: n, flows: flows}
	s.RunFor(e8Warmup)
	run.joinsStart, run.atJoins = s.Elapsed(), flowTraffic(flows)
	s.StartStaggered(s.Nodes()[half:], e8JoinPhase/time.Duration(n-half), 1)
	s.RunFor(e8JoinPhase)
	run.churnStart, run.atChurn = s.Elapsed(), flowTraffic(flows)
	run.evs = e8Churn(o, s, flows, ends)
	s.RunUntil(run.churnStart + 2*e8Churned*e8ChurnStep + e8Tail)
	run.stop = s.Elapsed()
	for _, f := range flows {
		f.StopFlow()
	}
	s.RunFor(2 * time.Second) // the frames in flight arrive
	run.atStop = flowTraffic(flows)
	for _, f := range flows {
		f.arrivals, f.acks = deliveries(f.Frames)
	}
	run.addFlowRows(phases)
	r.note("n=%d: graceful stops lost %d frames in all (target 0)", n, run.addEventRows(events))
	r.Figures = append(r.Figures, Figure{Name: fmt.Sprintf("outages-n%d", n), Chart: run.chart()})
	inv := invariants(r, fmt.Sprintf("n=%d after churn", n), s)
	var flowData []map[string]any
	for _, f := range flows {
		flowData = append(flowData, map[string]any{"flow": f.label, "src": f.Src, "dst": f.Dst, "frames_sent": f.SentFrames, "frames_received": f.RecvFrames, "acks": f.Acks, "traffic": f.Traffic})
	}
	return map[string]any{"flows": flowData, "events": run.evs, "joins_start_ms": run.joinsStart.Milliseconds(), "churn_start_ms": run.churnStart.Milliseconds(), "invariants": inv}
}

// addFlowRows adds a row per flow and phase: joins, then churn.
func (run *e8Run) addFlowRows(t *Table) {
	hits := make([]int, len(run.flows))
	for _, e := range run.evs {
		for _, k := range e.OnPath {
			hits[k]++
		}
	}
	for _, ph := range []struct {
		name          string
		from, to      time.Duration
		before, after []sim.Traffic
		stopsAndKills func(k int) any
	}{
		{"joins", run.joinsStart, run.churnStart, run.atJoins, run.atChurn, func(int) any { return "-" }},
		{"churn", run.churnStart, run.stop, run.atChurn, run.atStop, func(k int) any { return hits[k] }},
	} {
		for k, f := range run.flows {
			sent, lost, dups := frameLosses(f.Frames, ph.from, ph.to)
			total, longest := silence(f.arrivals, e8FrameEvery, ph.from, ph.to)
			datagrams := ph.after[k].Sub(ph.before[k]).TotalMessages()
			t.Add(run.n, f.label, ph.name, sent, 100*float64(sent-lost)/float64(max(sent, 1)), lost, dups, total, longest,
				float64(datagrams)/float64(max(sent, 1)), ph.stopsAndKills(k))
		}
	}
}

// addEventRows adds a row per event and flow it touched, and returns the
// frames the graceful stops lost.
func (run *e8Run) addEventRows(t *Table) (stopLosses int) {
	for j, e := range run.evs {
		to := e.at + e8ChurnStep
		if j+1 < len(run.evs) {
			to = run.evs[j+1].at
		}
		for k, f := range run.flows {
			x := f.effect(e.at, to)
			onPath := slices.Contains(e.OnPath, k)
			if e.Kind == e8Stop {
				stopLosses += x.framesLost
			}
			if onPath || x.touched() {
				t.Add(run.n, e.at, e.Kind, e.Node, f.label, yesNo(onPath), x.rateBefore, x.lostTime, x.longestSilence, x.fellText(), x.backText(to-e.at), x.framesLost, x.ackLostTime)
			}
		}
	}
	return stopLosses
}

// flowTraffic reads what the overlay sent so far on each flow's behalf.
func flowTraffic(flows []*e8Flow) []sim.Traffic {
	out := make([]sim.Traffic, len(flows))
	for i, f := range flows {
		out[i] = f.Traffic
	}
	return out
}

// e8StartFlows starts up to e8Flows recorded bulk flows between nodes of
// the first half that have no direct link, no two sharing a node, and
// returns them with the set of their ends.
func e8StartFlows(s *sim.Sim, half int) ([]*e8Flow, map[int]bool) {
	var pairs [][2]int
	for a := range half {
		adjacent := s.Node(a).Core().Adjacency()
		for b := range half {
			if a != b && !slices.Contains(adjacent, s.Node(b).ID) {
				pairs = append(pairs, [2]int{a, b})
			}
		}
	}
	s.Rand().Shuffle(len(pairs), func(i, j int) { pairs[i], pairs[j] = pairs[j], pairs[i] })
	var flows []*e8Flow
	ends := map[int]bool{}
	for _, p := range pairs {
		a, b := p[0], p[1]
		if len(flows) == e8Flows || ends[a] || ends[b] {
			continue
		}
		ends[a], ends[b] = true, true
		f := s.AddFlow(sim.FlowConfig{Kind: sim.Bulk, Src: a, Dst: b, Size: e8FrameSize, Rate: e8FrameSize / e8FrameEvery.Seconds(), Start: s.Elapsed(), Record: true})
		flows = append(flows, &e8Flow{Flow: f, label: fmt.Sprintf("%s→%s", s.Node(a).Name, s.Node(b).Name)})
	}
	return flows, ends
}

// e8Churn runs the churn: e8Churned times a node on a flow's path stops
// gracefully or, alternately, is killed, and restarts at the next event.
func e8Churn(o Options, s *sim.Sim, flows []*e8Flow, ends map[int]bool) []e8Event {
	var evs []e8Event
	first := s.Elapsed() + e8TraceLead
	down := -1
	for k := range 2 * e8Churned {
		at := first + time.Duration(k)*e8ChurnStep
		s.RunUntil(at - e8TraceLead)
		paths := e8TracePaths(s, flows)
		s.RunUntil(at)
		e := e8Event{at: at, AtMS: at.Milliseconds(), Paths: paths, node: down, Kind: e8Restart}
		if k%2 == 0 {
			e.node = e8Victim(s, paths, k/2, ends)
			e.Kind = e8Kill
			if k%4 == 0 {
				e.Kind = e8Stop
			}
		}
		v := s.Node(e.node)
		switch e.Kind {
		case e8Stop:
			v.Stop()
		case e8Kill:
			v.Kill()
		case e8Restart:
			v.Start()
		}
		e.Node = v.Name
		for f, p := range paths {
			if slices.Contains(p, e.node) {
				e.OnPath = append(e.OnPath, f)
			}
		}
		down = e.node
		evs = append(evs, e)
		o.logf("e8 n=%d: %v %s %s, on the path of flows %v", len(s.Nodes()), at, e.Kind, v.Name, e.OnPath)
	}
	return evs
}

// e8TracePaths sends one traced frame along each flow, the way the flow's
// frames go, and returns the paths they took.
func e8TracePaths(s *sim.Sim, flows []*e8Flow) [][]int {
	traces := make([]*sim.Flow, len(flows))
	for i, f := range flows {
		traces[i] = s.AddFlow(sim.FlowConfig{Kind: sim.OneWay, Src: f.Src, Dst: f.Dst, Start: s.Elapsed(), Trace: true})
	}
	s.RunFor(e8TraceLead)
	paths := make([][]int, len(flows))
	for i, t := range traces {
		paths[i], _ = t.Path() // a lost trace leaves the flow out of this event's choice
	}
	return paths
}

// e8Victim picks the node the i-th stop or kill hits: a running node
// inside a flow's path, taking the flows in turn, never a flow's end — a
// dead end stops its flow whatever the overlay does. When no path has
// such a node (every flow has a direct link), any other running node;
// e8MinN leaves some.
func e8Victim(s *sim.Sim, paths [][]int, i int, ends map[int]bool) int {
	eligible := func(among []int) []int {
		return slices.DeleteFunc(slices.Clone(among), func(v int) bool { return ends[v] || !s.Node(v).Up() })
	}
	for j := range paths {
		p := paths[(i+j)%len(paths)]
		if len(p) < 3 {
			continue // a direct link, or the trace got lost
		}
		if inside := eligible(p[1 : len(p)-1]); len(inside) > 0 {
			return inside[s.Rand().IntN(len(inside))]
		}
	}
	all := make([]int, len(s.Nodes()))
	for v := range all {
		all[v] = v
	}
	others := eligible(all)
	return others[s.Rand().IntN(len(others))]
}

// chart plots, per second as iperf reports, the share of each flow's
// frames that did not arrive, from the start of the joins, with the events
// marked on the time axis: outages stand out as spikes from zero.
func (run *e8Run) chart() plot.Chart {
	c := plot.Chart{Title: fmt.Sprintf("TCP-like flows through joins and churn, n=%d (E8)", run.n),
		XLabel: "seconds since the second half started joining", YLabel: "frames not delivered in the second, %"}
	perBin := float64(e8ChartBin / e8FrameEvery)
	since := func(t time.Duration) float64 { return (t - run.joinsStart).Seconds() }
	for _, f := range run.flows {
		sr := plot.Series{Name: f.label, Lines: true}
		for t := run.joinsStart; t+e8ChartBin <= run.stop; t += e8ChartBin {
			// A second can get more than its share when a shorter path
			// brings frames early; that is no loss.
			missing := max(perBin-float64(countIn(f.arrivals, t, t+e8ChartBin)), 0)
			sr.X = append(sr.X, since(t))
			sr.Y = append(sr.Y, 100*missing/perBin)
		}
		c.Series = append(c.Series, sr)
	}
	marks := map[string]*plot.Series{e8Stop: {Name: "graceful stop", Points: true}, e8Kill: {Name: "kill", Points: true}, e8Restart: {Name: "restart", Points: true}}
	for _, e := range run.evs {
		m := marks[e.Kind]
		m.X, m.Y = append(m.X, since(e.at)), append(m.Y, 0)
	}
	for _, k := range []string{e8Stop, e8Kill, e8Restart} {
		c.Series = append(c.Series, *marks[k])
	}
	return c
}

// e8Effect is what an event did to a flow, from the event to the next.
type e8Effect struct {
	rateBefore     float64 // frames per second delivered over e8Baseline before the event
	lostTime       time.Duration
	longestSilence time.Duration
	// fell is how long after the event delivery per e8Bin first fell
	// below e8RecoveredShare of rateBefore, back when it was there again:
	// the time to recover; -1 when it never fell, or was not back in time.
	fell, back  time.Duration
	framesLost  int
	ackLostTime time.Duration
}

// effect measures what the event at did to the flow until to.
func (f *e8Flow) effect(at, to time.Duration) e8Effect {
	x := e8Effect{rateBefore: float64(countIn(f.arrivals, at-e8Baseline, at)) / e8Baseline.Seconds()}
	x.lostTime, x.longestSilence = silence(f.arrivals, e8FrameEvery, at, to)
	x.fell, x.back = dip(f.arrivals, at, to, x.rateBefore)
	_, x.framesLost, _ = frameLosses(f.Frames, at-e8InFlight, to-e8InFlight)
	x.ackLostTime, _ = silence(f.acks, sim.AckEvery*e8FrameEvery, at, to)
	return x
}

// touched reports whether the flow lost anything.
func (x e8Effect) touched() bool { return x.lostTime > 0 || x.framesLost > 0 || x.ackLostTime > 0 }

func (x e8Effect) fellText() any {
	if x.fell < 0 {
		return "-"
	}
	return x.fell
}

func (x e8Effect) backText(window time.Duration) any {
	switch {
	case x.fell < 0:
		return "-"
	case x.back < 0:
		return fmt.Sprintf("not within %v", window)
	}
	return x.back
}

// deliveries returns when the frames' first copies arrived and when their
// acknowledgements did, each sorted.
func deliveries(frames []sim.Frame) (arrivals, acks []time.Duration) {
	for _, fr := range frames {
		if fr.Arrived >= 0 {
			arrivals = append(arrivals, fr.Arrived)
		}
		if fr.Acked >= 0 {
			acks = append(acks, fr.Acked)
		}
	}
	slices.Sort(arrivals)
	slices.Sort(acks)
	return arrivals, acks
}

// countIn counts the sorted times in [from, to).
func countIn(times []time.Duration, from, to time.Duration) int {
	i, _ := slices.BinarySearch(times, from)
	j, _ := slices.BinarySearch(times, to)
	return j - i
}

// silence measures the time in [from, to) with nothing delivered: the
// stretches between consecutive deliveries (sorted times) beyond the
// flow's normal spacing, in total and the longest.
func silence(times []time.Duration, spacing, from, to time.Duration) (total, longest time.Duration) {
	i, _ := slices.BinarySearch(times, from)
	prev := from - spacing // nothing before the window: silent from its start
	if i > 0 {
		prev = times[i-1]
	}
	for ; ; i++ {
		next := to
		if i < len(times) {
			next = min(times[i], to)
		}
		if d := next - max(prev+spacing, from); d > 0 {
			total += d
			longest = max(longest, d)
		}
		if next == to {
			return total, longest
		}
		prev = times[i]
	}
}

// dip returns how long after at the deliveries per e8Bin first fell
// below e8RecoveredShare of rate (per second) — the start of the first
// bin short of it — and how long after at they were back: the end of the
// next bin that holds enough, as only then is it known. -1 for never
// fell, or for not back before to.
func dip(times []time.Duration, at, to time.Duration, rate float64) (fell, back time.Duration) {
	want := e8RecoveredShare * rate * e8Bin.Seconds()
	fell = -1
	for b := at; b+e8Bin <= to; b += e8Bin {
		low := float64(countIn(times, b, b+e8Bin)) < want
		switch {
		case low && fell < 0:
			fell = b - at
		case !low && fell >= 0:
			return fell, b + e8Bin - at
		}
	}
	return fell, -1
}

// frameLosses counts the frames sent in [from, to), those of them never
// delivered, and the extra copies delivered.
func frameLosses(frames []sim.Frame, from, to time.Duration) (sent, lost, duplicates int) {
	bySent := func(fr sim.Frame, t time.Duration) int { return cmp.Compare(fr.Sent, t) }
	i, _ := slices.BinarySearchFunc(frames, from, bySent)
	j, _ := slices.BinarySearchFunc(frames, to, bySent)
	for _, fr := range frames[i:j] {
		if fr.Copies == 0 {
			lost++
		}
		duplicates += max(fr.Copies-1, 0)
	}
	return j - i, lost, duplicates
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
