package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"burrow/config"
	"burrow/netlab"
	"burrow/netlab/cluster"
)

// PathsOptions configures `burrow bench paths`.
type PathsOptions struct {
	// Seconds is the length of each iperf3 test.
	Seconds int
	// Rounds is how many times each of the restarted nodes is restarted.
	Rounds int
	// Burrow is the burrow executable to measure.
	Burrow string
	// Progress receives a line per step as the run goes.
	Progress io.Writer
}

// pathClass is a kind of path a link can take in the NAT lab; it orders
// the report's rows.
type pathClass int

const (
	directToBeacon pathClass = iota
	holePunched
	webSocketToBeacon
	beaconRelay
	beaconRelayOverWebSocket
)

var pathClassTitles = [...]string{
	directToBeacon:           "direct to the public beacon",
	holePunched:              "direct, hole-punched",
	webSocketToBeacon:        "WebSocket to the beacon",
	beaconRelay:              "relayed by the beacon",
	beaconRelayOverWebSocket: "relayed by the beacon, one end on WebSocket",
}

func (c pathClass) String() string { return pathClassTitles[c] }

// statusPath is the path `burrow status` names for a link of the class.
func (c pathClass) statusPath() string {
	switch c {
	case webSocketToBeacon:
		return "websocket"
	case beaconRelay, beaconRelayOverWebSocket:
		return "relay"
	}
	return "direct"
}

// classify returns the path burrow has to settle on between nodes behind
// NATs of kinds x and y in the lab, where the beacon is the only node
// without a NAT (docs/nat-traversal.md): a UDP-blocked node reaches the
// beacon over WebSocket and everyone else through the beacon's relay; the
// public beacon is reached directly from any UDP-capable NAT; two
// endpoint-independent NATs punch through; a symmetric NAT anywhere else
// leaves only the relay.
func classify(x, y netlab.NAT) pathClass {
	pair := map[netlab.NAT]bool{x: true, y: true}
	switch {
	case pair[netlab.UDPBlocked] && pair[netlab.NoNAT]:
		return webSocketToBeacon
	case pair[netlab.UDPBlocked]:
		return beaconRelayOverWebSocket
	case pair[netlab.NoNAT]:
		return directToBeacon
	case pair[netlab.Symmetric]:
		return beaconRelay
	}
	return holePunched
}

// The lab's member sites, in the order they are built; the beacon is on
// the lab's internet.
var pathSites = []struct {
	name string
	nat  netlab.NAT
}{
	{"a", netlab.EndpointIndependent},
	{"b", netlab.EndpointIndependent},
	{"c1", netlab.Symmetric},
	{"c2", netlab.Symmetric},
	{"d", netlab.UDPBlocked},
}

// natStateTitles name the two kinds of restart, with the routers' state
// for the node kept or cleared.
var natStateTitles = map[bool]string{false: "kept", true: "cleared"}

// restartedNodes are restarted in turn, one behind each kind of NAT.
var restartedNodes = []string{"a", "c1", "d"}

// measuredPairs carry iperf3 and ping, client first, one per path class
// worth a throughput number.
var measuredPairs = [][2]string{{"a", "b"}, {"c1", "c2"}, {"d", "a"}, {"beacon", "a"}}

// Timings of the paths run.
const (
	// The links' timers are those of the e2e NAT tests, so the numbers
	// compare with docs/nat-traversal.md.
	pathsKeepalive = 500 * time.Millisecond
	pathsDeadAfter = 3 * time.Second
	pathsStabilize = time.Second
	// convergeTimeout bounds the first start until every pair is on its
	// path; setupTimeout the same for one restarted node; the NAT matrix
	// sees at most 4.2 s.
	convergeTimeout = 60 * time.Second
	setupTimeout    = 30 * time.Second
	// dropTimeout bounds waiting for the others to drop their links to a
	// stopped node: it says goodbye, or they declare it dead.
	dropTimeout = pathsDeadAfter + 5*time.Second
	// statusPoll is how often the restarted node's status is read; it
	// bounds how exactly a move to another path is timed (link up times
	// come from the node's own clock).
	statusPoll = 20 * time.Millisecond
)

// beaconWebSocketPort is where the beacon serves plain ws://, the port a
// UDP-blocked site lets out.
const beaconWebSocketPort = 443

// pathsSubnet holds the nodes' virtual addresses.
var pathsSubnet = netip.MustParsePrefix("10.78.0.0/24")

// PathsReport is the outcome of a paths run.
type PathsReport struct {
	Started time.Time
	Seconds int
	Rounds  int
	// ConvergedAfter is the time from starting every node to every pair
	// being linked on its path, as both ends see it.
	ConvergedAfter time.Duration
	Restarts       []*restartResult
	Pairs          []*pairResult
	// BeaconPeakRSS is the beacon's VmHWM at the end of the run.
	BeaconPeakRSS uint64
	// BeaconRelayRate is the beacon's relay cap in bytes per second.
	BeaconRelayRate float64
	// LoadBefore and LoadAfter are the one-minute load averages.
	LoadBefore, LoadAfter string
}

// linkSetup is how one link of a restarted node came up.
type linkSetup struct {
	Peer  string
	Class pathClass
	// UpAfter is from starting the process to the link's since in status,
	// on whichever path it came up first, FirstPath.
	UpAfter   time.Duration
	FirstPath string
	// OnPathAfter is when the link was first seen on the path of its
	// class: UpAfter when it came up there, else the first status poll
	// that showed the move; zero if it never got there.
	OnPathAfter time.Duration
	// RTT is the round trip of its last handshake, on its path.
	RTT time.Duration
}

// restartResult is one restart of one node.
type restartResult struct {
	Node string
	// ClearedNAT says every router's connection tracking entries for the
	// node were deleted before it started again.
	ClearedNAT bool
	Links      []*linkSetup
	// Failed says what did not happen in time; Links holds what did.
	Failed string
}

// firstLink returns the link that came up first, nil without any.
func (r *restartResult) firstLink() *linkSetup {
	var first *linkSetup
	for _, l := range r.Links {
		if first == nil || l.UpAfter < first.UpAfter {
			first = l
		}
	}
	return first
}

// allOnPathAfter is when the last link reached its path; false when one
// never did.
func (r *restartResult) allOnPathAfter() (time.Duration, bool) {
	var last time.Duration
	for _, l := range r.Links {
		if l.OnPathAfter == 0 {
			return 0, false
		}
		last = max(last, l.OnPathAfter)
	}
	return last, r.Failed == ""
}

// pairResult is the throughput and RTT between two nodes.
type pairResult struct {
	From, To string
	Class    pathClass
	// Failed says why there are no numbers: most often, the pair was not
	// on its class's path.
	Failed   string
	RTT      time.Duration
	PingLost int
	throughput
	// BeaconCPUSeconds is the beacon's CPU time during the iperf3 test;
	// RelayedDatagrams what the beacon's relay carried between the two,
	// both ways, during it.
	BeaconCPUSeconds float64
	RelayedDatagrams uint64
}

// beaconCPUPerGB is the beacon's CPU time per 10^9 bytes received.
func (p *pairResult) beaconCPUPerGB() float64 {
	return p.BeaconCPUSeconds / (float64(p.Bytes) / 1e9)
}

// pathNode is one burrow node of the NAT lab.
type pathNode struct {
	*cluster.Node
	nat  netlab.NAT   // NoNAT for the beacon
	site *netlab.Site // nil for the beacon
	// ended is closed when the running process ends; nil while stopped.
	ended chan struct{}
}

func (n *pathNode) start() error {
	if err := n.Node.Start(); err != nil {
		return err
	}
	ended, p := make(chan struct{}), n.Process
	go func() {
		p.Wait()
		close(ended)
	}()
	n.ended = ended
	return nil
}

func (n *pathNode) stop() error {
	n.ended = nil
	return n.Node.Stop()
}

// upPath is the path of n's link to peer when it is up, "" otherwise.
func (n *pathNode) upPath(peer *pathNode) string {
	st, err := n.Status()
	if err != nil {
		return ""
	}
	for _, l := range st.Links {
		if l.NodeID == peer.ID.String() && l.State == "up" {
			return l.Path
		}
	}
	return ""
}

// pathsRun is one paths run in progress.
type pathsRun struct {
	opts     PathsOptions
	progress io.Writer
	beacon   *pathNode
	nodes    []*pathNode // the beacon first, then pathSites
	byName   map[string]*pathNode
	byID     map[string]*pathNode
}

// RunPaths builds the NAT lab, waits until every pair is linked on its
// path, measures throughput and RTT over each kind of path, then restarts
// nodes in turn and times their links coming up. The error is for a lab
// that could not be built or converge, or a cancelled ctx; a pair or a
// restart that fails is recorded as such.
func RunPaths(ctx context.Context, opts PathsOptions) (*PathsReport, error) {
	if opts.Seconds < 1 {
		return nil, fmt.Errorf("bench: seconds must be at least 1, not %d", opts.Seconds)
	}
	if opts.Rounds < 1 {
		return nil, fmt.Errorf("bench: rounds must be at least 1, not %d", opts.Rounds)
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	lab, err := newLab("burrow-bench-paths-", opts.Progress)
	if err != nil {
		return nil, err
	}
	defer lab.Close()
	r := &pathsRun{opts: opts, progress: opts.Progress, byName: map[string]*pathNode{}, byID: map[string]*pathNode{}}
	if err := r.build(lab); err != nil {
		return nil, err
	}
	report := &PathsReport{
		Started: time.Now(), Seconds: opts.Seconds, Rounds: opts.Rounds,
		LoadBefore: loadAverage(), BeaconRelayRate: r.beacon.Config.RelayRate(),
	}
	if report.ConvergedAfter, err = r.converge(ctx); err != nil {
		return nil, err
	}
	for _, pair := range measuredPairs {
		report.Pairs = append(report.Pairs, r.measurePair(ctx, r.byName[pair[0]], r.byName[pair[1]]))
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	for round := 1; round <= opts.Rounds; round++ {
		for _, name := range restartedNodes {
			for _, clearNAT := range []bool{false, true} {
				fmt.Fprintf(r.progress, "== round %d of %d: restarting %s, NAT state %s\n", round, opts.Rounds, name, natStateTitles[clearNAT])
				report.Restarts = append(report.Restarts, r.restart(ctx, r.byName[name], clearNAT))
				if err := ctx.Err(); err != nil {
					return nil, err
				}
			}
		}
	}
	if report.BeaconPeakRSS, err = peakRSS(r.beacon.Process.Pid()); err != nil {
		return nil, fmt.Errorf("beacon peak RSS: %w", err)
	}
	report.LoadAfter = loadAverage()
	return report, ctx.Err()
}

// build adds the beacon, the sites and one node per site to the lab and
// configures them: every member knows only the beacon, and links to every
// other member.
func (r *pathsRun) build(lab *netlab.Lab) error {
	nw, err := cluster.New(lab, "paths", r.opts.Burrow)
	if err != nil {
		return err
	}
	add := func(host *netlab.Host, name string, site *netlab.Site) error {
		node, err := nw.AddNode(host, name, hostAddr(pathsSubnet, len(r.nodes)+1))
		if err != nil {
			return err
		}
		n := &pathNode{Node: node, nat: netlab.NoNAT, site: site}
		if site != nil {
			n.nat = site.NAT
		}
		r.nodes = append(r.nodes, n)
		r.byName[name], r.byID[node.ID.String()] = n, n
		return nil
	}
	beaconHost, err := lab.AddHost("beacon")
	if err != nil {
		return err
	}
	if err := add(beaconHost, "beacon", nil); err != nil {
		return err
	}
	r.beacon = r.nodes[0]
	for _, s := range pathSites {
		site, err := lab.AddSite(s.name+"-router", s.nat)
		if err != nil {
			return err
		}
		host, err := site.AddHost(s.name)
		if err != nil {
			return err
		}
		if err := add(host, s.name, site); err != nil {
			return err
		}
	}
	webSocket := netip.AddrPortFrom(beaconHost.Addr, beaconWebSocketPort)
	r.beacon.Config.Beacon.Enabled = true
	r.beacon.Config.Beacon.WebSocket.Listen = webSocket.String()
	for _, n := range r.nodes {
		// Debug logging would cost the data path time it does not spend
		// in production.
		n.Config.Log.Level = "info"
		n.Config.Links.Keepalive = pathsKeepalive
		n.Config.Links.DeadAfter = pathsDeadAfter
		n.Config.Overlay.Stabilize = pathsStabilize
		n.Config.Overlay.Successors = len(r.nodes) - 1 // a full mesh
		if n != r.beacon {
			n.Config.Beacons = []config.BeaconRef{{
				Address:   r.beacon.Endpoint().String(),
				WebSocket: "ws://" + webSocket.String() + "/burrow",
			}}
		}
	}
	return nil
}

// converge starts every node and waits until each pair is linked on its
// class's path from both ends.
func (r *pathsRun) converge(ctx context.Context) (time.Duration, error) {
	fmt.Fprintf(r.progress, "== starting %d nodes\n", len(r.nodes))
	start := time.Now()
	for _, n := range r.nodes {
		if err := n.start(); err != nil {
			return 0, err
		}
	}
	var lagging string
	err := r.waitUntil(ctx, convergeTimeout, "every pair on its path", func() bool {
		lagging = r.offPath(r.nodes)
		return lagging == ""
	})
	if err != nil {
		return 0, fmt.Errorf("%w; not yet: %s", err, lagging)
	}
	converged := time.Since(start)
	fmt.Fprintf(r.progress, "   every pair on its path %v after start\n", converged.Round(10*time.Millisecond))
	return converged, nil
}

// offPath describes the first pair among nodes (every pair with one of
// them) whose link is not up on its class's path at both ends, or
// returns "".
func (r *pathsRun) offPath(nodes []*pathNode) string {
	for _, x := range nodes {
		for _, y := range r.nodes {
			if x == y {
				continue
			}
			want := classify(x.nat, y.nat).statusPath()
			if got := x.upPath(y); got != want {
				return fmt.Sprintf("%s–%s is %q at %s, want %q", x.Name, y.Name, got, x.Name, want)
			}
		}
	}
	return ""
}

// waitUntil polls cond every statusPoll until it holds, failing when
// timeout passes, ctx ends or a node's process ends.
func (r *pathsRun) waitUntil(ctx context.Context, timeout time.Duration, what string, cond func() bool) error {
	waitCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for !cond() {
		for _, n := range r.nodes {
			if n.ended == nil {
				continue
			}
			select {
			case <-n.ended:
				return fmt.Errorf("%s exited while waiting for %s (log %s)", n.Name, what, n.Process.LogPath())
			default:
			}
		}
		select {
		case <-waitCtx.Done():
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("waiting for %s: %w", what, err)
			}
			return fmt.Errorf("timed out after %v waiting for %s", timeout, what)
		case <-time.After(statusPoll):
		}
	}
	return nil
}

// measurePair checks that from and to are linked on their class's path,
// then pings and runs iperf3 from one to the other, timing the beacon's
// CPU and counting what its relay carries for them; a path that changed
// meanwhile voids the numbers.
func (r *pathsRun) measurePair(ctx context.Context, from, to *pathNode) *pairResult {
	p := &pairResult{From: from.Name, To: to.Name, Class: classify(from.nat, to.nat)}
	fmt.Fprintf(r.progress, "== %s → %s (%s)\n", from.Name, to.Name, p.Class)
	fail := func(format string, args ...any) *pairResult {
		p.Failed = fmt.Sprintf(format, args...)
		fmt.Fprintf(r.progress, "   failed: %s\n", p.Failed)
		return p
	}
	want := p.Class.statusPath()
	if err := r.checkPath(from, to, want); err != nil {
		return fail("%v", err)
	}
	target := to.Address.Addr()
	if err := r.waitUntil(ctx, upTimeout, "a ping through the link", func() bool {
		res, err := netlab.Ping(ctx, from.Host, target, 1, 200*time.Millisecond)
		return err == nil && res.Received == 1
	}); err != nil {
		return fail("%v", err)
	}
	ping, err := netlab.Ping(ctx, from.Host, target, pingCount, pingInterval)
	if err != nil || ping.Received == 0 {
		return fail("ping: %d of %d replies, %v", ping.Received, ping.Transmitted, err)
	}
	p.RTT, p.PingLost = ping.AvgRTT, ping.Transmitted-ping.Received

	server, err := netlab.StartIperf3Server(to.Host)
	if err != nil {
		return fail("iperf3 server: %v", err)
	}
	defer server.Stop()
	relayedBefore, err := r.relayedBetween(from, to)
	if err != nil {
		return fail("beacon status: %v", err)
	}
	cpuBefore, err := cpuSeconds(r.beacon.Process.Pid())
	if err != nil {
		return fail("beacon CPU time: %v", err)
	}
	tp, err := runIperf3(ctx, from.Host, target, r.opts.Seconds)
	cpuAfter, cpuErr := cpuSeconds(r.beacon.Process.Pid())
	relayedAfter, relayErr := r.relayedBetween(from, to)
	if err := errors.Join(err, cpuErr, relayErr); err != nil {
		return fail("iperf3: %v", err)
	}
	if err := r.checkPath(from, to, want); err != nil {
		return fail("after iperf3: %v", err)
	}
	p.throughput = tp
	p.BeaconCPUSeconds = cpuAfter - cpuBefore
	p.RelayedDatagrams = relayedAfter - relayedBefore
	fmt.Fprintf(r.progress, "   ping %s ms; iperf3 %.0f Mbit/s, %d retransmits; beacon %.2f CPU-s, relayed %d datagrams\n",
		millis(p.RTT), tp.BitsPerSecond/1e6, tp.Retransmits, p.BeaconCPUSeconds, p.RelayedDatagrams)
	return p
}

// checkPath fails unless both ends report their link up on path want.
func (r *pathsRun) checkPath(x, y *pathNode, want string) error {
	if gx, gy := x.upPath(y), y.upPath(x); gx != want || gy != want {
		return fmt.Errorf("not on the %s path: %s says %q, %s says %q", want, x.Name, gx, y.Name, gy)
	}
	return nil
}

// relayedBetween is how many datagrams the beacon relayed between x and
// y, both ways, so far.
func (r *pathsRun) relayedBetween(x, y *pathNode) (uint64, error) {
	st, err := r.beacon.Status()
	if err != nil {
		return 0, err
	}
	ids := []string{x.ID.String(), y.ID.String()}
	var n uint64
	for _, p := range st.RelayPairs {
		if slices.Contains(ids, p.From) && slices.Contains(ids, p.To) {
			n += p.Datagrams
		}
	}
	return n, nil
}

// restart stops n, waits until the others have dropped their links to
// it, with clearNAT deletes the routers' state for it, starts it again
// with the same key, state and configuration, and follows its links
// coming up until each is on its class's path, at both ends.
func (r *pathsRun) restart(ctx context.Context, n *pathNode, clearNAT bool) *restartResult {
	res := &restartResult{Node: n.Name, ClearedNAT: clearNAT}
	others := slices.DeleteFunc(slices.Clone(r.nodes), func(o *pathNode) bool { return o == n })
	if err := r.takeDown(ctx, n, others, clearNAT); err != nil {
		// Unmeasured, but running again for the rest of the run.
		res.Failed = err.Error()
		if n.ended == nil {
			res.Failed += "; " + r.bringBack(ctx, n)
		}
		return res
	}
	start := time.Now()
	if err := n.start(); err != nil {
		res.Failed = fmt.Sprintf("starting: %v", err)
		return res
	}
	setups := map[string]*linkSetup{}
	observe := func() {
		st, err := n.Status()
		seen := time.Since(start)
		if err != nil {
			return
		}
		for _, l := range st.Links {
			peer := r.byID[l.NodeID]
			if peer == nil || l.State != "up" {
				continue
			}
			s := setups[peer.Name]
			if s == nil {
				s = &linkSetup{Peer: peer.Name, Class: classify(n.nat, peer.nat), UpAfter: l.Since.Sub(start), FirstPath: l.Path}
				setups[peer.Name] = s
				res.Links = append(res.Links, s)
			}
			if l.Path != s.Class.statusPath() {
				continue
			}
			if s.OnPathAfter == 0 {
				s.OnPathAfter = seen
				if l.Path == s.FirstPath {
					s.OnPathAfter = s.UpAfter
				}
			}
			s.RTT = time.Duration(l.RTT * float64(time.Millisecond))
		}
	}
	var lagging string
	err := r.waitUntil(ctx, setupTimeout, n.Name+"'s links on their paths", func() bool {
		observe()
		if len(setups) < len(others) || slices.ContainsFunc(res.Links, func(s *linkSetup) bool { return s.OnPathAfter == 0 }) {
			return false
		}
		// The far ends too, so the next restart meets a settled network.
		lagging = r.offPath([]*pathNode{n})
		return lagging == ""
	})
	slices.SortFunc(res.Links, func(x, y *linkSetup) int { return strings.Compare(x.Peer, y.Peer) })
	if err != nil {
		res.Failed = fmt.Sprintf("%v; %s", err, r.describeLinks(n, others, setups, lagging))
	}
	r.reportRestart(res)
	return res
}

// takeDown stops n, waits until the others have dropped their links to
// it and, with clearNAT, deletes the routers' state for it.
func (r *pathsRun) takeDown(ctx context.Context, n *pathNode, others []*pathNode, clearNAT bool) error {
	if err := n.stop(); err != nil {
		return fmt.Errorf("stopping: %w", err)
	}
	if err := r.waitUntil(ctx, dropTimeout, "the others to drop their links to "+n.Name, func() bool {
		return !slices.ContainsFunc(others, func(o *pathNode) bool { return o.upPath(n) != "" })
	}); err != nil {
		return err
	}
	if clearNAT {
		return r.clearNATState(ctx, n)
	}
	return nil
}

// bringBack starts n after a failed restart and waits for its links, so
// that the run can go on; it says how that went.
func (r *pathsRun) bringBack(ctx context.Context, n *pathNode) string {
	if err := n.start(); err != nil {
		return fmt.Sprintf("starting it again: %v", err)
	}
	var lagging string
	if err := r.waitUntil(ctx, setupTimeout, n.Name+"'s links on their paths", func() bool {
		lagging = r.offPath([]*pathNode{n})
		return lagging == ""
	}); err != nil {
		return fmt.Sprintf("started again: %v; %s", err, lagging)
	}
	return "started again, its links on their paths"
}

// clearNATState deletes the connection tracking entries every router
// holds for n: its own router's mappings, and the entries the others'
// routers keep for their hosts' traffic to n's public address, which let
// n's packets in. Without this, a restarted node finds the holes it had
// punched still open.
func (r *pathsRun) clearNATState(ctx context.Context, n *pathNode) error {
	deleted := 0
	for _, o := range r.nodes {
		if o.site == nil || n.site == nil {
			continue
		}
		filters := [][]string{{"--dst", n.site.WAN.String()}, {"--src", n.site.WAN.String()}}
		if o == n {
			filters = [][]string{{"--src", n.Host.Addr.String()}}
		}
		for _, filter := range filters {
			// conntrack exits with 1 when nothing matched, so its
			// summary line tells success.
			out, err := o.site.Router.Run(ctx, "conntrack", append([]string{"--delete"}, filter...)...)
			count, ok := parseDeletedFlows(string(out))
			if !ok {
				return fmt.Errorf("clearing %s's NAT state on %s: %w", n.Name, o.site.Name, err)
			}
			deleted += count
		}
	}
	fmt.Fprintf(r.progress, "   deleted %d connection tracking entries for %s\n", deleted, n.Name)
	return nil
}

// deletedFlows matches conntrack's summary of a deletion.
var deletedFlows = regexp.MustCompile(`(\d+) flow entries have been deleted`)

// parseDeletedFlows returns how many entries conntrack --delete says it
// deleted; false when its output has no summary.
func parseDeletedFlows(out string) (int, bool) {
	m := deletedFlows.FindStringSubmatch(out)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	return n, err == nil
}

// describeLinks says which of n's links are missing or off their path.
func (r *pathsRun) describeLinks(n *pathNode, others []*pathNode, setups map[string]*linkSetup, lagging string) string {
	var parts []string
	for _, o := range others {
		s := setups[o.Name]
		switch {
		case s == nil:
			parts = append(parts, "no link to "+o.Name)
		case s.OnPathAfter == 0:
			parts = append(parts, fmt.Sprintf("%s–%s is %q, want %q", n.Name, o.Name, n.upPath(o), s.Class.statusPath()))
		}
	}
	if len(parts) == 0 && lagging != "" {
		parts = append(parts, lagging)
	}
	return strings.Join(parts, ", ")
}

func (r *pathsRun) reportRestart(res *restartResult) {
	for _, l := range res.Links {
		onPath := fmt.Sprintf(", handshake RTT %s ms", millis(l.RTT))
		switch {
		case l.OnPathAfter == 0:
			onPath = fmt.Sprintf(", never on %s", l.Class.statusPath())
		case l.FirstPath != l.Class.statusPath():
			onPath = fmt.Sprintf(", on %s after %s s", l.Class.statusPath(), seconds(l.OnPathAfter)) + onPath
		}
		fmt.Fprintf(r.progress, "   %s–%s up on %s after %s s%s\n", res.Node, l.Peer, l.FirstPath, seconds(l.UpAfter), onPath)
	}
	if res.Failed != "" {
		fmt.Fprintf(r.progress, "   failed: %s\n", res.Failed)
	}
}

// seconds renders a duration in seconds with millisecond resolution.
func seconds(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }
