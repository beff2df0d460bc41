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
		Long: `Build a burrow network on this one machine: network namespaces as hosts,
a beacon on the lab's internet and nodes on four sites behind NAT routers —
three that keep one mapping per socket (home, office, campus: hole punching
links them directly) and a mobile carrier that maps every destination anew
(its links go through the beacon's relay). Every node is configured with
the beacon's address and nothing else; the nodes find their places on the
ring by themselves while a progress bar follows them.

The demo then pings between every pair of sites and from every node to the
beacon, prints the path, round trip and losses of each, and keeps the
network up until Ctrl-C (or for --hold); then it removes every namespace,
link and process it created. Meanwhile it serves the dashboard of one node
on --dashboard: open the printed URL to watch the overlay ring live.
Needs root.

If a demo was killed before it could clean up, --cleanup removes what it
left behind.`,
		Example: `  sudo burrow demo
  sudo burrow demo --nodes 20 --hold 2m --dashboard 127.0.0.1:9090
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
	cmd.Flags().IntVar(&opts.Nodes, "nodes", demo.MinNodes, "number of nodes on the sites, besides the beacon (at least 12)")
	cmd.Flags().DurationVar(&opts.Hold, "hold", 0, "keep the network up this long after the summary (0: until Ctrl-C)")
	cmd.Flags().StringVar(&opts.Dashboard, "dashboard", "127.0.0.1:8080", `address:port on this machine serving a node's dashboard ("" for none)`)
	cmd.Flags().BoolVar(&cleanup, "cleanup", false, "remove what a crashed demo left behind, then exit")
	rootCmd.AddCommand(cmd)
}
