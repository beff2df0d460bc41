// Command burrow is the burrow daemon, CLI, beacon and simulator in one binary.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"burrow/cni"
)

// rootCmd is the parent of every subcommand; each subcommand's file adds
// itself in an init function so that files stay independent of each other.
var rootCmd = &cobra.Command{
	Use:   "burrow",
	Short: "A self-organizing layer-2 VPN for edge and cloud",
	Long: `burrow joins machines anywhere into one encrypted virtual Ethernet.

Nodes link to each other over UDP, switch frames with Bounded Flood over a
ring overlay, and need nothing central to carry their traffic.`,
	SilenceUsage:  true,
	SilenceErrors: true,
}

func main() {
	// Container runtimes run CNI plugins by file name: installed as
	// burrow-cni, this binary is burrow's.
	if filepath.Base(os.Args[0]) == cni.PluginName {
		cni.Main()
		return
	}
	if err := rootCmd.Execute(); err != nil {
		if err.Error() != "" {
			fmt.Fprintln(os.Stderr, "burrow:", err)
		}
		os.Exit(1)
	}
}
