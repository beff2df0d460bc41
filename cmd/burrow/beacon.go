package main

import (
	"github.com/spf13/cobra"

	"burrow/config"
)

func init() {
	var path string
	cmd := &cobra.Command{
		Use:   "beacon",
		Short: "Run a beacon: first contact, STUN server and relay for a network",
		Long: `Run a beacon in the foreground: a member of the network with a public
address that joining nodes contact first. It answers STUN binding requests
on its burrow port, so nodes behind NATs learn how they are seen; it routes
their overlay signaling before they have found their place on the ring; and
it relays link traffic for pairs that cannot connect directly. Relayed
traffic stays encrypted end to end, and only members (nodes with a valid
certificate, linked to the beacon) may use the relay. With beacon.websocket
it also takes WebSocket connections from networks that only let HTTPS out.

The config is a normal node config; beacon mode is switched on, and the TAP
device is left out unless tap.enabled says otherwise. Any public node can be
a beacon too: set beacon.enabled in its config and run it with burrow up.`,
		Example: `  burrow beacon -c /etc/burrow/beacon.yaml`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := config.Load(path)
			if err != nil {
				return err
			}
			cfg.Beacon.Enabled = true
			if cfg.TAP.Enabled == nil {
				cfg.TAP.On = false
			}
			return runDaemon(cfg)
		},
	}
	cmd.Flags().StringVarP(&path, "config", "c", "/etc/burrow/beacon.yaml", "configuration file")
	rootCmd.AddCommand(cmd)
}
