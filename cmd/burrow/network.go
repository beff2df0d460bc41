package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"burrow/config"
	"burrow/node"
	"burrow/runtime"
)

func init() { rootCmd.AddCommand(newNetworkCmd()) }

func newNetworkCmd() *cobra.Command {
	var socket string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "network",
		Short: "Show and change the network-wide settings every node's DHCP server hands out",
		Long: `Network-wide settings are set once, by any member whose certificate carries
the group ` + node.SettingsGroup + ` (burrow cert sign --group ` + node.SettingsGroup + `), and
read by every node within half a minute. Every node's DHCP server then hands
them to its clients; burrow status shows them.

Settings:
  dns_search     domain clients search names in (DHCP options 15 and 119)
  mtu            interface MTU clients set, 576 to 9000 (option 26)
  router         default gateway clients get, an IPv4 address (option 3)
  route:PREFIX   gateway of a static route to PREFIX (option 121)

They live in one DHT record that carries its writer's certificate: nodes
take it only from a member allowed to write it, and any allowed member may
change what another set.`,
		Example: `  burrow network set mtu 1400
  burrow network set route:10.20.0.0/16 10.99.0.1
  burrow network unset route:10.20.0.0/16
  burrow network show`,
	}
	change := func(w io.Writer, name, value string) error {
		resp, err := runtime.Query(socket, runtime.Request{Command: "network-set", Setting: &runtime.SettingChange{Name: name, Value: value}})
		if err != nil {
			return err
		}
		if resp.Settings == nil {
			return fmt.Errorf("the node sent no answer")
		}
		return printSettings(w, &node.SettingsStatus{NetworkSettings: *resp.Settings}, asJSON)
	}
	set := &cobra.Command{
		Use:   "set NAME VALUE",
		Short: "Set a network-wide setting, in the running node's name",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[1] == "" {
				return fmt.Errorf("no value given for %s; to remove it, run burrow network unset %s", args[0], args[0])
			}
			return change(cmd.OutOrStdout(), args[0], args[1])
		},
	}
	unset := &cobra.Command{
		Use:   "unset NAME",
		Short: "Remove a network-wide setting",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return change(cmd.OutOrStdout(), args[0], "")
		},
	}
	show := &cobra.Command{
		Use:   "show",
		Short: "Show the settings in force on the running node, and who set them",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			resp, err := runtime.Query(socket, runtime.Request{Command: "status"})
			if err != nil {
				return err
			}
			return printSettings(cmd.OutOrStdout(), resp.Status.Settings, asJSON)
		},
	}
	cmd.AddCommand(set, unset, show)
	cmd.PersistentFlags().StringVar(&socket, "socket", config.DefaultControlSocket, "control socket of the node")
	cmd.PersistentFlags().BoolVar(&asJSON, "json", false, "print JSON for scripts")
	return cmd
}

// printSettings writes the settings a line each, or as JSON.
func printSettings(w io.Writer, s *node.SettingsStatus, asJSON bool) error {
	if s == nil {
		s = &node.SettingsStatus{}
	}
	if asJSON {
		return json.NewEncoder(w).Encode(s)
	}
	for _, line := range settingsLines(s.NetworkSettings) {
		fmt.Fprintln(w, line)
	}
	if s.SetBy != "" {
		fmt.Fprintf(w, "set by node %s, record expires %s\n", s.SetBy, s.Expires.Format(time.RFC3339))
	}
	return nil
}

// settingsLines are the settings as "name value" lines, "no network
// settings" when there are none.
func settingsLines(s node.NetworkSettings) []string {
	var lines []string
	if s.DNSSearch != "" {
		lines = append(lines, "dns_search "+s.DNSSearch)
	}
	if s.MTU != 0 {
		lines = append(lines, fmt.Sprintf("mtu %d", s.MTU))
	}
	if s.Router != "" {
		lines = append(lines, "router "+s.Router)
	}
	for _, p := range slices.Sorted(maps.Keys(s.Routes)) {
		lines = append(lines, fmt.Sprintf("route:%s %s", p, s.Routes[p]))
	}
	if len(lines) == 0 {
		return []string{"no network settings"}
	}
	return lines
}

// settingsSummary is the settings on one line, for burrow status.
func settingsSummary(s node.NetworkSettings) string { return strings.Join(settingsLines(s), ", ") }
