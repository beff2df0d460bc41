package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"burrow/runtime"
)

func init() { rootCmd.AddCommand(newPingCmd()) }

// pingReport is what `burrow ping --json` prints.
type pingReport struct {
	Target   string               `json:"target"`
	NodeID   string               `json:"node_id,omitempty"`
	Pings    []runtime.PingAnswer `json:"pings"`
	Sent     int                  `json:"sent"`
	Answered int                  `json:"answered"`
	// DirectAfter is the time from the first ping to the first one
	// answered over a direct or LAN path, DirectAt that ping's number
	// (from 1); both absent while no answer came directly.
	DirectAfter *float64 `json:"direct_after_s,omitempty"`
	DirectAt    int      `json:"direct_at_ping,omitempty"`
}

func isDirect(path string) bool { return path == "direct" || path == "lan" }

func newPingCmd() *cobra.Command {
	var (
		sock        socketFlags
		count       int
		interval    time.Duration
		timeout     time.Duration
		untilDirect bool
		asJSON      bool
	)
	cmd := &cobra.Command{
		Use:   "ping NAME|NODE-ID|ADDRESS",
		Short: "Ping a member through the running node and show which path each answer took",
		Long: `Ask the running node to ping a member of the network, and print for each
ping the path its answer took and its round trip:

  lan        a direct link to the member's own (private) address
  direct     a direct link across NATs (hole punched, or a public member)
  relay      the link to the member is relayed by another member (named),
             e.g. the beacon; "over websocket" when this node reaches that
             relay over WebSocket
  turn       the link crosses a TURN server
  websocket  the link rides a WebSocket to a beacon
  multi-hop  there is no link to the member: the answer crossed the overlay
             through other members (the neighbour it came from is named)

The member is named by its certificate name (as burrow peers and the
dashboard's map show it), its node ID or the ID's first digits, or an
address inside the network: one a linked member's certificate lists, or
one this host's kernel resolves over the overlay (ARP or neighbour
discovery, as for any packet to it), whose MAC leads to the member.
The ping is a control message through the overlay, answered by the member's
burrow (not its kernel: a firewall on the TAP does not stop it). A member
with no link is asked for an on-demand link at the first ping (with
overlay.on_demand.enabled, the default), so later pings show the path turn
direct once hole punching succeeds.

Exits with status 1 when no ping was answered, or with --until-direct when
no answer came over a direct path.`,
		Example: `  burrow ping db1
  burrow ping --until-direct -c 30 --interval 200ms laptop
  burrow ping -c 3 --json 10.9.0.7
  burrow ping 3f2a9c01`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if count < 1 {
				return fmt.Errorf("--count %d: send at least one ping", count)
			}
			if timeout <= 0 || timeout > runtime.MaxPingTimeout {
				return fmt.Errorf("--timeout %v: give a time above 0 and up to %v", timeout, runtime.MaxPingTimeout)
			}
			if interval < 0 {
				return fmt.Errorf("--interval %v is negative", interval)
			}
			w := cmd.OutOrStdout()
			report := pingReport{Target: args[0], Pings: []runtime.PingAnswer{}}
			start := time.Now()
			for i := 1; i <= count; i++ {
				sent := time.Now()
				resp, err := runtime.Query(sock.path(), runtime.Request{Command: "ping", Ping: &runtime.PingRequest{Target: args[0], Timeout: timeout}})
				if err != nil {
					return err
				}
				a := *resp.Ping
				report.Sent++
				report.Target, report.NodeID = a.Target, a.NodeID
				report.Pings = append(report.Pings, a)
				if a.Answered {
					report.Answered++
				}
				if !asJSON {
					printPingAnswer(w, a, timeout)
				}
				if a.Answered && isDirect(a.Path) && report.DirectAt == 0 {
					after := sent.Sub(start).Seconds()
					report.DirectAfter, report.DirectAt = &after, i
					if untilDirect {
						break
					}
				}
				if i < count {
					time.Sleep(max(0, interval-time.Since(sent)))
				}
			}
			if asJSON {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				if err := enc.Encode(report); err != nil {
					return err
				}
			} else {
				printPingSummary(w, report)
			}
			switch {
			case report.Answered == 0:
				return fmt.Errorf("no answer from %s to %d pings", report.Target, report.Sent)
			case untilDirect && report.DirectAt == 0:
				return errors.New("no direct path to " + report.Target + " yet")
			}
			return nil
		},
	}
	sock.register(cmd)
	cmd.Flags().IntVarP(&count, "count", "c", 10, "number of pings")
	cmd.Flags().DurationVar(&interval, "interval", time.Second, "time between pings")
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Second, "how long to wait for each answer")
	cmd.Flags().BoolVar(&untilDirect, "until-direct", false, "stop at the first answer over a direct path; exit 1 if none came")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON document for scripts at the end")
	return cmd
}

func printPingAnswer(w io.Writer, a runtime.PingAnswer, timeout time.Duration) {
	who := fmt.Sprintf("%s (%s)", a.Target, shortID(a.NodeID))
	if !a.Answered {
		fmt.Fprintf(w, "timeout: no answer from %s within %v\n", who, timeout)
		return
	}
	var path string
	switch a.Path {
	case "relay":
		path = "relay " + a.Via + overWhat(a.ViaPath)
	case "multi-hop":
		path = fmt.Sprintf("multi-hop, %d hops, last from %s%s", a.Hops, a.Via, overWhat(a.ViaPath))
	default:
		path = a.Path
		if a.Endpoint != "" {
			path += " " + a.Endpoint
		}
	}
	fmt.Fprintf(w, "pong from %s via %s in %.2f ms\n", who, path, a.RTTms)
}

// overWhat names the kind of this node's link to a relay or neighbour
// when it is not a plain direct one.
func overWhat(path string) string {
	if path == "" || path == "direct" {
		return ""
	}
	return " over " + path
}

func printPingSummary(w io.Writer, r pingReport) {
	fmt.Fprintf(w, "--- %s: %d pings, %d answered", r.Target, r.Sent, r.Answered)
	switch {
	case r.DirectAt == 1:
		fmt.Fprint(w, "; direct from the first")
	case r.DirectAfter != nil:
		fmt.Fprintf(w, "; direct from ping %d, %.1f s after the first", r.DirectAt, *r.DirectAfter)
	}
	fmt.Fprintln(w)
}
