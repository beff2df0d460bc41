package main

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"

	"github.com/spf13/cobra"

	"burrow/identity"
)

// defaultNodeStateDir is where a node keeps its key unless told otherwise.
const defaultNodeStateDir = "/var/lib/burrow"

func init() { rootCmd.AddCommand(newKeyCmd()) }

// newKeyCmd builds a fresh "key" command tree with its own flag variables,
// so that tests can run it repeatedly without stale flag values.
func newKeyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "key",
		Short: "Manage this node's static key",
		Long: `Each node has a static X25519 key in STATE/node.key. Peers authenticate the
node by it, and the node's ID on the ring is derived from its public half.`,
		Example: `  burrow key generate
  burrow key show --state /srv/burrow`,
	}
	cmd.AddCommand(newKeyGenerateCmd(), newKeyShowCmd())
	return cmd
}

func newKeyGenerateCmd() *cobra.Command {
	var stateDir string
	cmd := &cobra.Command{
		Use:   "generate [--state DIR]",
		Short: "Create this node's key unless it exists, and print it",
		Long: `Create DIR/node.key (mode 0600, DIR created 0700) unless it already exists,
then print the public key and node ID. An existing key is reused, never
replaced: the node's identity and certificate depend on it.

Give the printed public key to whoever signs certificates:
  burrow cert sign --public-key KEY ...`,
		Example: `  burrow key generate
  burrow key generate --state /srv/burrow`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			key, created, err := identity.LoadOrCreateNodeKey(stateDir, rand.Reader)
			if err != nil {
				return fmt.Errorf("cannot set up the node key in %s: %v", stateDir, err)
			}
			path := filepath.Join(stateDir, identity.NodeKeyFile)
			if created {
				fmt.Fprintf(cmd.OutOrStdout(), "Created %s\n", path)
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "Reusing the existing %s\n", path)
			}
			printNodeKey(cmd.OutOrStdout(), key)
			return nil
		},
	}
	cmd.Flags().StringVar(&stateDir, "state", defaultNodeStateDir, "state directory holding node.key")
	return cmd
}

func newKeyShowCmd() *cobra.Command {
	var stateDir string
	cmd := &cobra.Command{
		Use:   "show [--state DIR]",
		Short: "Print this node's public key and node ID",
		Long: `Print the public key (base64) and node ID of the key in DIR/node.key.
The private key is never printed.`,
		Example: `  burrow key show
  burrow key show --state /srv/burrow`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			key, err := loadNodeKeyForCLI(stateDir)
			if err != nil {
				return err
			}
			printNodeKey(cmd.OutOrStdout(), key)
			return nil
		},
	}
	cmd.Flags().StringVar(&stateDir, "state", defaultNodeStateDir, "state directory holding node.key")
	return cmd
}

// loadNodeKeyForCLI loads stateDir/node.key, turning a missing file into
// advice.
func loadNodeKeyForCLI(stateDir string) (identity.NodeKey, error) {
	key, err := identity.LoadNodeKey(filepath.Join(stateDir, identity.NodeKeyFile))
	if errors.Is(err, fs.ErrNotExist) {
		return key, fmt.Errorf("no node key in %s; create one with: burrow key generate --state %s", stateDir, stateDir)
	}
	return key, err
}

func printNodeKey(out io.Writer, key identity.NodeKey) {
	fmt.Fprintf(out, "public key: %s\n", base64.StdEncoding.EncodeToString(key.Public[:]))
	fmt.Fprintf(out, "node id:    %s\n", key.ID())
}
