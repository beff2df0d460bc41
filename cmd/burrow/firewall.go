package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"burrow/config"
	"burrow/runtime"
)

func init() { rootCmd.AddCommand(newFirewallCmd()) }

func newFirewallCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "firewall",
		Short: "Explain what the running node's firewall does with a packet",
	}
	var socket, addr string
	var asJSON bool
	check := &cobra.Command{
		Use:   "check FROM TO PROTO PORT",
		Short: "Say whether a packet between two members passes this node's firewall, and why",
		Long: `Ask the node running on this machine what its firewall does with the first
packet of a connection from member FROM to member TO (certificate names; one
of them must be this node), of protocol PROTO (tcp, udp or icmp) to
destination port PORT (for icmp: the ICMP type, 8 for ping).

The other member's groups are those of its certificate, which this node
holds while it has a link to it; without one, rules naming a host or groups
cannot match it, as they would not match a frame from it. Its address (for
cidr rules) is the first of its certificate, or --addr.

Nothing is opened or counted. The command exits with status 1 when the
packet is dropped.`,
		Example: `  burrow firewall check app1 db1 tcp 5432
  burrow firewall check db1 backup tcp 22 --json
  burrow firewall check laptop db1 icmp 8 --addr 10.9.0.66`,
		Args: cobra.ExactArgs(4),
		RunE: func(cmd *cobra.Command, args []string) error {
			port, err := strconv.Atoi(args[3])
			if err != nil {
				return fmt.Errorf("PORT %q is not a number", args[3])
			}
			q := runtime.FirewallQuery{From: args[0], To: args[1], Proto: strings.ToLower(args[2]), Port: port}
			if addr != "" {
				if q.Addr, err = netip.ParseAddr(addr); err != nil {
					return fmt.Errorf("--addr %q is not an IP address", addr)
				}
			}
			resp, err := runtime.Query(socket, runtime.Request{Command: "firewall-check", Firewall: &q})
			if err != nil {
				return err
			}
			a := resp.Firewall
			w := cmd.OutOrStdout()
			if asJSON {
				if err := json.NewEncoder(w).Encode(a); err != nil {
					return err
				}
			} else {
				who := fmt.Sprintf("%s (groups %s)", a.Member, strings.Join(a.Groups, ", "))
				if !a.Known {
					who = a.Member + " (no link to it: its certificate, and so its groups, are unknown here)"
				}
				verdict := "DROPPED"
				if a.Allowed {
					verdict = "ALLOWED"
				}
				fmt.Fprintf(w, "%s %s %d, %s %s → %s, other end %s at %s\n", a.Direction, q.Proto, q.Port, verdict, q.From, q.To, who, a.Addr)
				fmt.Fprintf(w, "  %s", a.Reason)
				if a.Rule != "" {
					fmt.Fprintf(w, ": %s", a.Rule)
				}
				fmt.Fprintln(w)
			}
			if !a.Allowed {
				return errDropped
			}
			return nil
		},
	}
	check.Flags().StringVar(&addr, "addr", "", "the other member's address, for cidr rules (default: the first of its certificate)")
	check.Flags().BoolVar(&asJSON, "json", false, "print JSON for scripts")
	check.Flags().StringVar(&socket, "socket", config.DefaultControlSocket, "control socket of the node")
	cmd.AddCommand(check)
	return cmd
}

// errDropped makes `burrow firewall check` exit 1 without more words: the
// verdict is printed already.
var errDropped = errors.New("")
