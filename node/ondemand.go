package node

import (
	"time"

	"burrow/nid"
	"burrow/overlay"
)

// OnDemandConfig: when the traffic from this bridge's leaves to one remote
// bridge stays above Threshold bytes per second for Window, the node opens
// a direct link to that bridge; when it stays below for Idle, the link
// goes again.
type OnDemandConfig struct {
	Enabled   bool
	Threshold float64
	Window    time.Duration
	Idle      time.Duration
}

// Defaults of OnDemandConfig.
const (
	DefaultOnDemandThreshold = 1 << 20 // 1 MiB/s
	DefaultOnDemandWindow    = 3 * time.Second
	DefaultOnDemandIdle      = 30 * time.Second
)

type onDemandState struct {
	cfg     OnDemandConfig
	active  map[nid.ID]bool // bridges we keep an on-demand link to
	traffic map[nid.ID]*bridgeTraffic
	last    time.Time
	// Opened and Closed count on-demand links over the node's life.
	opened, closed int
}

type bridgeTraffic struct {
	above, below time.Time // since when the rate has been above / below the threshold
	requested    time.Time
}

func (od *onDemandState) init(cfg OnDemandConfig) {
	if cfg.Threshold <= 0 {
		cfg.Threshold = DefaultOnDemandThreshold
	}
	if cfg.Window <= 0 {
		cfg.Window = DefaultOnDemandWindow
	}
	if cfg.Idle <= 0 {
		cfg.Idle = DefaultOnDemandIdle
	}
	od.cfg = cfg
	od.active = make(map[nid.ID]bool)
	od.traffic = make(map[nid.ID]*bridgeTraffic)
}

func (od *onDemandState) linked(root nid.ID) {
	if !od.active[root] {
		od.active[root] = true
		od.opened++
	}
}

func (od *onDemandState) linkDown(root nid.ID) {
	if od.active[root] {
		delete(od.active, root)
		od.closed++
	}
}

// tickOnDemand measures the traffic between local leaves and each remote
// bridge, both ways, from the flows' byte counters, and opens or drops
// on-demand links. Both directions count because only one end of a pair
// may know the other's bridge: the one that saw the other's flood.
func (n *Node) tickOnDemand(now time.Time) {
	od := &n.ov.od
	if !od.cfg.Enabled {
		return
	}
	dt := now.Sub(od.last)
	if dt < time.Second {
		return
	}
	od.last = now
	rates := make(map[nid.ID]float64)
	for k, f := range n.flows {
		remote := k.dst
		switch {
		case k.in == localPort:
		case f.out == localPort:
			remote = k.src
		default:
			continue // just passing through
		}
		total := f.bytes.Load()
		delta := total - f.counted
		f.counted = total
		if root, ok := n.learn.RootOf(remote); ok && root != n.self && root != (nid.ID{}) {
			rates[root] += float64(delta) / dt.Seconds()
		}
	}
	for _, root := range nid.SortedKeys(rates) {
		rate := rates[root]
		if od.traffic[root] == nil {
			od.traffic[root] = &bridgeTraffic{}
		}
		t := od.traffic[root]
		if rate >= od.cfg.Threshold {
			t.below = time.Time{}
			if t.above.IsZero() {
				t.above = now
			}
		} else {
			t.above = time.Time{}
			if t.below.IsZero() {
				t.below = now
			}
		}
	}
	for _, root := range nid.SortedKeys(od.traffic) {
		t := od.traffic[root]
		if _, seen := rates[root]; !seen {
			t.above = time.Time{}
			if t.below.IsZero() {
				t.below = now
			}
		}
		switch {
		case od.active[root] && !t.below.IsZero() && now.Sub(t.below) >= od.cfg.Idle:
			od.linkDown(root)
			delete(od.traffic, root)
		case !od.active[root] && !t.above.IsZero() && now.Sub(t.above) >= od.cfg.Window:
			if n.upLink(root) != nil {
				od.linked(root) // already adjacent: mark the link as carrying it
				continue
			}
			n.requestOnDemandLink(root, t, now)
		case t.above.IsZero() && t.below.IsZero():
			delete(od.traffic, root)
		}
	}
}

// requestOnDemandLink asks bridge root for an on-demand link, at most once
// per requestTimeout.
func (n *Node) requestOnDemandLink(root nid.ID, t *bridgeTraffic, now time.Time) {
	if now.Sub(t.requested) < requestTimeout {
		return
	}
	t.requested = now
	id := n.ov.rng.Uint64() | 1
	n.ov.requests[id] = pendingRequest{onDemand: root, expires: now.Add(requestTimeout)}
	n.originate(&overlay.Message{Type: overlay.LinkRequest, Dest: root, Exact: true, Origin: n.self,
		Via: n.via(), ID: id, Reasons: overlay.ReasonOnDemand, From: n.selfInfo()}, now)
}

// openOnDemandLink asks bridge root for an on-demand link without waiting
// for its traffic to grow: the firewall needs its member's certificate (a
// rule naming members cannot match a frame from one this node has no link
// to), or an operator pings it to see its path. The link closes as any
// on-demand link does once the traffic with root stays low.
func (n *Node) openOnDemandLink(root nid.ID, now time.Time) {
	od := &n.ov.od
	if !od.cfg.Enabled || n.ov.cfg.Disabled || root == n.self || n.upLink(root) != nil {
		return
	}
	t := od.traffic[root]
	if t == nil {
		t = &bridgeTraffic{below: now}
		od.traffic[root] = t
	}
	n.requestOnDemandLink(root, t, now)
}
