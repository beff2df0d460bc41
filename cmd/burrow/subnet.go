package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"burrow/node"
	"burrow/runtime"
	"burrow/warrens"
)

func init() { rootCmd.AddCommand(newSubnetCmd()) }

func newSubnetCmd() *cobra.Command {
	var (
		sock   socketFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "subnet [--json]",
		Short: "Show the running node's container subnets and their claims",
		Long: `Ask the running node for its self-assigned container subnets (Warrens):
an IPv4 /28 in 10.83.0.0/16 and an IPv6 /112 in fd53:7769:726c::/48,
derived from the machine id and claimed in the network's DHT so that no
two nodes route the same one. One row per family:

  FAMILY      ipv4 or ipv6
  SUBNET      the subnet claimed, or the candidate being claimed
  STATE       waiting (for the node to join the ring), claiming, claimed,
              or exhausted (other nodes hold every candidate)
  BRIDGE      the local bridge the subnet is routed on
  GATEWAY     the bridge's address: the containers' default route
  CONTAINERS  the addresses containers on the bridge may take

A candidate another node holds is listed below the table with its holder;
the node then claims the subnet of its machine id with "-1", "-2", ...
appended. Subnets are off unless services.subnets.enabled is true in the
node's configuration.`,
		Example: `  burrow subnet
  burrow subnet --json | jq -r '.subnets[] | select(.state=="claimed") | .gateway'
  burrow subnet --instance lab`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := sock.status()
			if err != nil {
				return err
			}
			subnets := newSubnetView(st)
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(subnets)
			}
			printSubnets(cmd.OutOrStdout(), subnets)
			return nil
		},
	}
	sock.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON for scripts")
	return cmd
}

// subnetView is what 'burrow subnet' shows.
type subnetView struct {
	// Enabled is services.subnets.enabled: a node with subnets on
	// always has a claim per family.
	Enabled bool        `json:"enabled"`
	Subnets []subnetRow `json:"subnets"`
	// peerNames maps the node IDs of linked peers to their names, to
	// name the holders of collided candidates.
	peerNames map[string]string
}

// subnetRow is one claim and, once the subnet is this node's, the
// addresses containers on the bridge use.
type subnetRow struct {
	node.SubnetStatus
	Gateway netip.Addr `json:"gateway,omitzero"`
	// Containers is the range of container addresses, "first-last".
	Containers string `json:"containers,omitempty"`
}

func newSubnetView(st *runtime.Status) subnetView {
	v := subnetView{Enabled: len(st.Services.Subnets) > 0, Subnets: []subnetRow{}, peerNames: map[string]string{}}
	for _, l := range st.Links {
		v.peerNames[l.NodeID] = l.Peer
	}
	for _, s := range st.Services.Subnets {
		row := subnetRow{SubnetStatus: s}
		if s.State == warrens.Claimed.String() {
			first, last := warrens.Containers(s.Prefix)
			row.Gateway, row.Containers = warrens.Bridge(s.Prefix), first.String()+"-"+last.String()
		}
		v.Subnets = append(v.Subnets, row)
	}
	return v
}

func printSubnets(w io.Writer, v subnetView) {
	if !v.Enabled {
		fmt.Fprintln(w, "container subnets are off on this node: set services.subnets.enabled: true in its configuration to claim subnets derived from the machine id")
		return
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FAMILY\tSUBNET\tSTATE\tBRIDGE\tGATEWAY\tCONTAINERS")
	for _, r := range v.Subnets {
		gateway := "-"
		if r.Gateway.IsValid() {
			gateway = r.Gateway.String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Family, r.Prefix, r.State, orDash(r.Bridge), gateway, orDash(r.Containers))
	}
	tw.Flush()
	for _, r := range v.Subnets {
		for _, c := range r.Collisions {
			holder := shortID(c.Holder)
			if name := v.peerNames[c.Holder]; name != "" {
				holder = name + " (" + holder + ")"
			}
			fmt.Fprintf(w, "collision: %s %s is held by %s\n", r.Family, c.Prefix, holder)
		}
	}
}
