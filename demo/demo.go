// Package demo runs a burrow network in network namespaces on this one
// machine: it builds a lab, starts real burrow daemons, waits for their
// links, pings between every pair over the virtual Ethernet, prints what
// happened and removes everything again.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"burrow/netlab"
	"burrow/netlab/cluster"
)

// Options configure a demo run.
type Options struct {
	Nodes  int           // how many burrow nodes (at least 3)
	Binary string        // the burrow executable the nodes run
	Hold   time.Duration // how long to keep the network up after the summary; 0 = until ctx ends
}

// Run builds, shows and tears down the demo network. It returns when the
// demo is over or ctx is cancelled (Ctrl-C), always cleaning up.
func Run(ctx context.Context, opts Options, w io.Writer) (err error) {
	if opts.Nodes < 3 {
		return errors.New("demo: need at least 3 nodes")
	}
	if err := netlab.Available(); err != nil {
		return fmt.Errorf("%w\n(the demo needs root and iproute2, iptables, iputils-ping: apt-get install -y iproute2 iptables iputils-ping)", err)
	}
	step := func(format string, args ...any) { fmt.Fprintf(w, "==> "+format+"\n", args...) }

	logs, err := os.MkdirTemp("", "burrow-demo-")
	if err != nil {
		return err
	}
	lab, err := netlab.New(netlab.Options{LogDir: logs})
	if err != nil {
		os.RemoveAll(logs)
		return err
	}
	defer func() {
		step("removing namespaces, links and processes of lab %s", lab.Prefix())
		err = errors.Join(err, lab.Close())
		if err == nil {
			os.RemoveAll(logs)
		} else {
			fmt.Fprintf(w, "the daemons' logs are kept in %s\n", logs)
		}
	}()
	step("lab %s: %d hosts on a shared bridge (logs in %s)", lab.Prefix(), opts.Nodes, lab.LogDir())
	nw, err := cluster.New(lab, "demo", opts.Binary)
	if err != nil {
		return err
	}
	for i := range opts.Nodes {
		host, err := lab.AddHost(fmt.Sprintf("h%d", i))
		if err != nil {
			return err
		}
		addr := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 42, 0, byte(i + 1)}), 24)
		if _, err := nw.AddNode(host, fmt.Sprintf("node%d", i), addr); err != nil {
			return err
		}
	}
	ring := append([]*cluster.Node(nil), nw.Nodes...)
	sort.Slice(ring, func(i, j int) bool { return ring[i].ID.Compare(ring[j].ID) < 0 })
	want := map[*cluster.Node]int{}
	for i, node := range ring {
		next := ring[(i+1)%len(ring)]
		node.Dial(next)
		want[node]++
		want[next]++
	}
	chord := ring[len(ring)/2]
	ring[0].Dial(chord)
	want[ring[0]]++
	want[chord]++
	step("CA and certificates for network %q; links: a ring in node-ID order plus one chord (a cycle, so broadcasts need Bounded Flood)", nw.Name)
	for _, node := range ring {
		if err := node.Start(); err != nil {
			return err
		}
	}
	if err := waitLinks(ctx, w, want); err != nil {
		return err
	}
	step("pinging every pair over the virtual Ethernet")
	if err := pingMatrix(ctx, w, nw.Nodes); err != nil {
		return err
	}
	st, err := ring[0].Status()
	if err == nil {
		step("status of %s (what `burrow status` shows):", ring[0].Name)
		for _, l := range st.Links {
			fmt.Fprintf(w, "    link to %-6s %-5s via %-18s rx %d B tx %d B (%s)\n", l.Peer, l.State, l.Endpoint, l.RxBytes, l.TxBytes, l.Cipher)
		}
		fmt.Fprintf(w, "    %d learned MACs, %d flows, %d broadcasts started, %d received\n", st.LearnedMACs, st.Flows, st.Floods.Started, st.Floods.Received)
	}
	fmt.Fprintf(w, "\nTry it: ip netns exec %s ping %s   (Ctrl-C ends the demo)\n", ring[0].Host.Namespace, ring[1].Address.Addr())
	if opts.Hold > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.Hold)
		defer cancel()
	}
	<-ctx.Done()
	return nil
}

// waitLinks shows a progress bar while the links come up.
func waitLinks(ctx context.Context, w io.Writer, want map[*cluster.Node]int) error {
	total := 0
	for _, n := range want {
		total += n
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start := time.Now()
	// On a terminal the bar redraws in place; in a log it prints each change.
	redraw, shown := "\n", -1
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			redraw = "\r"
		}
	}
	for {
		up := 0
		for node, n := range want {
			up += min(max(node.UpLinks(), 0), n)
		}
		if up != shown {
			if shown >= 0 {
				fmt.Fprint(w, redraw)
			}
			bar := strings.Repeat("#", 30*up/total) + strings.Repeat(".", 30-30*up/total)
			fmt.Fprintf(w, "    links [%s] %d/%d ends up", bar, up, total)
			shown = up
		}
		if up == total {
			fmt.Fprintf(w, " in %v\n", time.Since(start).Round(time.Millisecond))
			return nil
		}
		select {
		case <-ctx.Done():
			fmt.Fprintln(w)
			return fmt.Errorf("links did not come up: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// pingMatrix pings every ordered pair once and prints RTTs in a matrix.
func pingMatrix(ctx context.Context, w io.Writer, nodes []*cluster.Node) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "from \\ to\t")
	for _, n := range nodes {
		fmt.Fprintf(tw, "%s\t", n.Name)
	}
	fmt.Fprintln(tw)
	failed := 0
	for _, a := range nodes {
		fmt.Fprintf(tw, "%s\t", a.Name)
		for _, b := range nodes {
			if a == b {
				fmt.Fprint(tw, "-\t")
				continue
			}
			r, err := netlab.Ping(ctx, a.Host, b.Address.Addr(), 3, 100*time.Millisecond)
			if err != nil || r.Received == 0 {
				failed++
				fmt.Fprint(tw, "lost\t")
				continue
			}
			fmt.Fprintf(tw, "%.2f ms\t", float64(r.AvgRTT.Microseconds())/1000)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	if failed > 0 {
		return fmt.Errorf("%d pairs could not ping each other", failed)
	}
	return nil
}
