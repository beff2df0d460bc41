package bench

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

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
