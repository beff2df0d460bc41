package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"burrow/config"
	"burrow/node"
	"burrow/runtime"
)

func init() {
	var socket string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the running node's links and counters",
		Long: `Ask the running node (over its local control socket) for its status:
node ID, TAP device, links with their state, learned MACs and drop counters.`,
		Example: `  burrow status
  burrow status --json | jq '.links[] | select(.state=="up") | .peer'
  burrow status --socket /run/burrow/other.sock`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			resp, err := runtime.Query(socket, runtime.Request{Command: "status"})
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(resp.Status)
			}
			printStatus(cmd.OutOrStdout(), resp.Status)
			return nil
		},
	}
	cmd.Flags().StringVar(&socket, "socket", config.DefaultControlSocket, "control socket of the node")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON for scripts")
	rootCmd.AddCommand(cmd)
}

func printStatus(w io.Writer, st *runtime.Status) {
	fmt.Fprintf(w, "node      %s (%s) in network %s\n", st.Name, st.NodeID, st.Network)
	fmt.Fprintf(w, "listen    %s\n", st.Listen)
	fmt.Fprintf(w, "cert      %s\n", certificateLine(st.Certificate, time.Now()))
	fmt.Fprintf(w, "tap       %s mtu %d mac %s %v (vnet_hdr=%v tso=%v uso=%v queues=%d)\n",
		st.TAP.Name, st.TAP.MTU, st.TAP.MAC, st.TAP.Addresses, st.TAP.VnetHdr, st.TAP.TSO, st.TAP.USO, st.TAP.Queues)
	fmt.Fprintf(w, "switch    %d learned MACs, %d flows\n", st.LearnedMACs, st.Flows)
	fmt.Fprintf(w, "queues    dropped %d frames before encryption (fair queue), %d on receive (CoDel)\n", st.Queues.TAPDropped, st.Queues.ReceiveDropped)
	if fw := st.Firewall; fw != nil {
		fmt.Fprintf(w, "firewall  %d inbound and %d outbound rules; %d connections opened, %d open now; %d frames dropped\n",
			fw.InboundRules, fw.OutboundRules, fw.Opened, fw.Connections, fw.Dropped)
	}
	kv := st.Services.DHT
	fmt.Fprintf(w, "dht       %d records (%d as primary); refused %d forged or replayed writes, copies and answers\n", kv.Records, kv.Primary, kv.Forged)
	if s := st.Settings; s != nil {
		fmt.Fprintf(w, "settings  %s (set by %.8s)\n", settingsSummary(s.NetworkSettings), s.SetBy)
	}
	if g := st.Groups; len(g.Reported) > 0 {
		fmt.Fprintf(w, "multicast %d groups with listeners, %d here; kept %d group frames from the TAP\n", len(g.Reported), len(g.Local), g.Pruned)
	}
	for _, p := range st.Publications {
		fmt.Fprintf(w, "publish   %s -> %s's %s (serial %.8s, %s, until %s): %d open, %d accepted, %d failed, %d rejected; %s in, %s out\n",
			p.Listen, p.Member, p.Service, p.Serial, p.Source, p.NotAfter.Format(time.DateOnly), p.Open, p.Accepted, p.Failed, p.Rejected,
			bytesHuman(uint64(p.BytesIn)), bytesHuman(uint64(p.BytesOut)))
	}
	if x := st.XMPP; x != nil {
		fmt.Fprintf(w, "xmpp      %s\n", xmppLine(x, st.Rendezvous, time.Now()))
	}
	if ov := st.Overlay; ov.Enabled {
		kinds := map[string]int{}
		for _, l := range ov.Links {
			for _, r := range l.Local {
				kinds[r]++
			}
		}
		pred := "-"
		if ov.Predecessor != "" {
			pred = ov.Predecessor[:8]
		}
		succ := "-"
		if len(ov.Successors) > 0 {
			succ = ov.Successors[0][:8]
		}
		fmt.Fprintf(w, "ring      joined=%v predecessor %s successor %s, about %.0f nodes; links: %d successor, %d long-distance, %d on-demand\n",
			ov.Joined, pred, succ, ov.SizeEstimate, kinds["successor"], kinds["long-distance"], kinds["on-demand"])
		fmt.Fprintf(w, "forming   %s\n", formationLine(ov.Formation))
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PEER\tNODE ID\tSTATE\tPATH\tENDPOINT\tUP FOR\tRX\tTX")
	for _, l := range st.Links {
		up := "-"
		if !l.Since.IsZero() {
			up = time.Since(l.Since).Round(time.Second).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", l.Peer, l.NodeID[:8], l.State, l.Path, l.Endpoint, up, bytesHuman(l.RxBytes), bytesHuman(l.TxBytes))
	}
	for _, d := range st.Dials {
		if !d.Connected {
			fmt.Fprintf(tw, "-\t-\tdialing\tdirect\t%s\t-\t-\t%s\n", d.Endpoint, d.LastError)
		}
	}
	tw.Flush()
	fmt.Fprintf(w, "\ndrops     ")
	reasons := make([]string, 0, len(st.Drops))
	for k := range st.Drops {
		reasons = append(reasons, k)
	}
	sort.Strings(reasons)
	for _, k := range reasons {
		if v := st.Drops[k]; v > 0 {
			fmt.Fprintf(w, "%s=%d ", k, v)
		}
	}
	fmt.Fprintln(w)
}

// certificateLine says when the node's certificate runs out, loudly once
// that is near.
func certificateLine(c runtime.CertificateStatus, now time.Time) string {
	days := int(c.NotAfter.Sub(now).Hours() / 24)
	switch {
	case !now.Before(c.NotAfter):
		return fmt.Sprintf("EXPIRED on %s: members refuse this node; sign a new certificate (burrow cert sign) and install it (burrow join --cert FILE --force)", c.NotAfter.Format(time.DateOnly))
	case c.ExpiresSoon:
		return fmt.Sprintf("EXPIRES on %s, in %d days: sign a new certificate (burrow cert sign) and install it (burrow join --cert FILE --force); CA %s", c.NotAfter.Format(time.DateOnly), days, c.Issuer)
	}
	return fmt.Sprintf("valid until %s (%d days), CA %s", c.NotAfter.Format(time.DateOnly), days, c.Issuer)
}

// formationLine says how far the node got onto the ring and how long each
// step took, so a forming network can be told from a stuck one.
func formationLine(f node.FormationStatus) string {
	step := func(name string, after float64) string {
		if after == 0 {
			return name + " not yet"
		}
		return fmt.Sprintf("%s after %.1fs", name, after)
	}
	state := "settled (both ring neighbours confirm this node)"
	if !f.Settled {
		state = "not settled (a ring neighbour has not confirmed this node yet)"
	}
	return fmt.Sprintf("%s; %s, %s, %s, %s; left the ring %d times since joining", state,
		step("first link", f.FirstLinkAfter), step("joined", f.JoinedAfter), step("settled", f.SettledAfter),
		step("all long-distance links", f.LongLinksAfter), f.Unjoins)
}

func bytesHuman(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// xmppLine says whether the rendezvous server is reachable and what went
// through it; while it is away, links that are up stay up.
func xmppLine(x *runtime.XMPPStatus, rv *node.RendezvousStatus, now time.Time) string {
	state := "connected for " + now.Sub(x.Since).Round(time.Second).String()
	if !x.Connected {
		state = "not connected (links that are up stay up)"
		if x.LastError != "" {
			state += ": " + x.LastError
		}
	}
	line := fmt.Sprintf("%s at %s, node %s: %s", x.JID, x.Server, x.Node, state)
	if rv != nil {
		line += fmt.Sprintf("; %d cards listed, %d offers sent, %d received", rv.Listed, rv.OffersSent, rv.OffersGot)
	}
	return line
}
