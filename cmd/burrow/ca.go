package main

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/spf13/cobra"

	"burrow/identity"
)

func init() { rootCmd.AddCommand(newCACmd()) }

// newCACmd builds a fresh "ca" command tree with its own flag variables, so
// that tests can run it repeatedly without stale flag values.
func newCACmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ca",
		Short: "Manage a network's certificate authority",
		Long: `A burrow network is defined by its certificate authority (CA): a node is a
member when it holds a certificate the CA signed. The CA's private key is only
needed where certificates are signed; nodes need just ca.crt.`,
		Example: "  burrow ca init --network home",
	}
	cmd.AddCommand(newCAInitCmd())
	return cmd
}

func newCAInitCmd() *cobra.Command {
	var network, dir string
	cmd := &cobra.Command{
		Use:   "init --network NAME [--dir DIR]",
		Short: "Create the certificate authority of a new network",
		Long: `Create a new network: generate its CA key and write two files into DIR:

  ca.key  the CA private key (mode 0600). Whoever holds it can admit nodes:
          keep it secret, ideally offline.
  ca.crt  the network name and CA public key. Copy it to every node.

An existing CA is never overwritten: replacing it would orphan every
certificate it signed. The printed fingerprint identifies the CA; 'burrow cert
show' prints the same value as a certificate's issuer.`,
		Example: `  burrow ca init --network home
  burrow ca init --network lab.example --dir /secure/lab-ca`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if network == "" {
				return errors.New("--network is required: name the new network, e.g. --network home")
			}
			if err := identity.CheckNetworkName(network); err != nil {
				return fmt.Errorf("--network: %v", err)
			}
			ca, err := identity.NewCA(network, rand.Reader)
			if err != nil {
				return err
			}
			if err := ca.Save(dir); errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("%s already holds a CA; choose another --dir (replacing a CA orphans every certificate it signed)", dir)
			} else if err != nil {
				return fmt.Errorf("cannot create the CA in %s: %v", dir, err)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "Created the CA of network %q in %s\n", network, dir)
			fmt.Fprintf(out, "  fingerprint: %s\n", ca.Fingerprint())
			fmt.Fprintf(out, "  %s  signs certificates: keep it secret, ideally offline\n", filepath.Join(dir, identity.CAKeyFile))
			fmt.Fprintf(out, "  %s  copy it to every node\n", filepath.Join(dir, identity.CACertFile))
			return nil
		},
	}
	cmd.Flags().StringVar(&network, "network", "", "name of the new network: 1-64 characters of a-z, 0-9, '.' and '-'")
	cmd.Flags().StringVar(&dir, "dir", "burrow-ca", "directory to create ca.key and ca.crt in")
	return cmd
}
