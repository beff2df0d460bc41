package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"burrow/config"
	"burrow/nat"
	"burrow/runtime"
)

func init() { rootCmd.AddCommand(newNetcheckCmd()) }

func newNetcheckCmd() *cobra.Command {
	var (
		path   string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "netcheck [--json]",
		Short: "Report this host's NAT: UDP, public address, mapping, port allocation, nearest beacon",
		Long: `Find out how this host reaches the network, from the configuration alone
(the daemon need not run: netcheck opens sockets of its own):

  udp              whether any beacon answered over UDP
  public address   how each beacon (and the TURN server, if configured)
                   sees this host, and its round trip
  mapping          the NAT's mapping behaviour (RFC 4787): none (no NAT),
                   endpoint-independent (hole punching works),
                   address-dependent, address-and-port-dependent, or
                   dependent (one of these two: no server answered on two
                   ports of one address); unknown with a single beacon, as
                   it takes servers at two addresses to tell
  port allocation  how the NAT picks the port of a new mapping: preserved
                   (the socket's own), sequential (predictable) or random,
                   from the mappings of four sockets
  filtering        none without a NAT; otherwise unknown, as beacons answer
                   only from the address they were asked at
  websocket        whether each beacon's WebSocket opens, and how fast: the
                   way out where UDP is blocked
  nearest beacon   the beacon that answered fastest

It asks every beacon in the configuration's beacons list, and exits with
status 1 when none answered at all.`,
		Example: `  burrow netcheck
  burrow netcheck -c /etc/burrow/burrow.yaml --json | jq .mapping`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(path)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			r, err := runtime.Netcheck(ctx, cfg)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				if err := enc.Encode(r); err != nil {
					return err
				}
			} else {
				printNetcheck(w, r)
			}
			if r.NearestBeacon == nil {
				return errors.New("no beacon answered, over UDP or WebSocket")
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&path, "config", "c", "/etc/burrow/burrow.yaml", "configuration file")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON for scripts")
	return cmd
}

func printNetcheck(w io.Writer, r runtime.NetcheckReport) {
	yes := map[bool]string{true: "yes", false: "no"}
	fmt.Fprintf(w, "udp              %s\n", yes[r.UDP])
	for _, s := range r.Servers {
		seen := "no answer"
		if s.Answered {
			seen = fmt.Sprintf("sees %s, %.2f ms", s.Mapped, s.RTTms)
		}
		fmt.Fprintf(w, "%-16s %s %s: %s\n", "public address", s.Kind, s.Address, seen)
	}
	fmt.Fprintf(w, "mapping          %s (%s)\n", r.Mapping, r.MappingWhy)
	fmt.Fprintf(w, "port allocation  %s (%s)\n", r.PortAllocation, r.AllocationWhy)
	fmt.Fprintf(w, "filtering        %s (%s)\n", r.Filtering, r.FilteringWhy)
	for _, ws := range r.WebSockets {
		state := fmt.Sprintf("opens in %.2f ms", ws.RTTms)
		if !ws.OK {
			state = "fails: " + ws.Error
		}
		fmt.Fprintf(w, "websocket        %s %s\n", ws.URL, state)
	}
	if b := r.NearestBeacon; b != nil {
		fmt.Fprintf(w, "nearest beacon   %s over %s, %.2f ms\n", b.Address, b.Via, b.RTTms)
	} else {
		fmt.Fprintln(w, "nearest beacon   none answered: check the beacons' addresses, and that UDP or TCP to them is let out")
	}
	if r.UDP && r.Mapping != nat.MappingNone && r.Mapping != nat.MappingEndpointIndependent {
		// Each socket's mapping per server: what a peer would have to guess.
		fmt.Fprintf(w, "mappings         %d for %d requests from %d sockets: %s\n", len(r.PublicAddresses), len(r.Mappings),
			sockets(r.Mappings), strings.Join(r.PublicAddresses, ", "))
	}
}

// sockets counts the local sockets that got answers.
func sockets(ms []runtime.NetcheckMapping) int {
	seen := map[uint16]bool{}
	for _, m := range ms {
		seen[m.LocalPort] = true
	}
	return len(seen)
}
