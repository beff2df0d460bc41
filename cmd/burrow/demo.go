package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"burrow/demo"
	"burrow/netlab"
)

func init() {
	var opts demo.Options
	var cleanup bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a burrow network in namespaces on this machine",
		Long: `Build a small burrow network on this one machine: network namespaces as
hosts, real burrow daemons, links in a ring with a chord. The demo waits for
the links, pings every pair over the virtual Ethernet, shows a node's status
and keeps the network up until Ctrl-C; then it removes every namespace, link
and process it created. Needs root.

If a demo was killed before it could clean up, --cleanup removes what it
left behind.`,
		Example: `  sudo burrow demo
  sudo burrow demo --nodes 8 --hold 30s
  sudo burrow demo --cleanup`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cleanup {
				return netlab.CleanupAll()
			}
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			opts.Binary = exe
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return demo.Run(ctx, opts, cmd.OutOrStdout())
		},
	}
	cmd.Flags().IntVar(&opts.Nodes, "nodes", 6, "number of nodes")
	cmd.Flags().DurationVar(&opts.Hold, "hold", 0, "keep the network up this long after the summary (0: until Ctrl-C)")
	cmd.Flags().BoolVar(&cleanup, "cleanup", false, "remove what a crashed demo left behind, then exit")
	rootCmd.AddCommand(cmd)
}
