package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"mellium.im/xmpp/jid"

	"burrow/config"
	"burrow/runtime"
)

func init() {
	var path, admin, passwordFile string
	create := &cobra.Command{
		Use:   "create-node [--config FILE] [--jid ADMIN --password-file FILE]",
		Short: "Create the network's list of cards on the XMPP rendezvous server, once",
		Long: `Create, on the publish-subscribe service named by rendezvous.xmpp in the
configuration, the node where every member keeps its card (node ID and
endpoints): at most rendezvous.xmpp.max_items items, readable and writable by
every account of the server. Members create it themselves where the server
lets accounts create nodes; prosody lets only its admins, so run this once
as one of them (--jid and --password-file), with any member's configuration
for the server, CA and node names.`,
		Example: `  burrow xmpp create-node --jid admin@xmpp.example.org --password-file admin.pass
  burrow xmpp create-node --config /etc/burrow/burrow.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := config.Load(path)
			if err != nil {
				return err
			}
			x := cfg.Rendezvous.XMPP
			if x == nil {
				return fmt.Errorf("%s has no rendezvous.xmpp section", path)
			}
			if admin != "" {
				if x.Account, err = jid.Parse(admin); err != nil || x.Account.Localpart() == "" {
					return fmt.Errorf("--jid %q is not an account such as admin@xmpp.example.org", admin)
				}
				x.JID = admin
			}
			if passwordFile != "" {
				x.Password, x.PasswordFile = "", passwordFile
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			err = runtime.CreateXMPPNode(ctx, x, newLogger(cfg.Log))
			if errors.Is(err, runtime.ErrNodeExists) {
				fmt.Fprintf(cmd.OutOrStdout(), "node %s exists already on %s\n", x.Node, x.PubSub)
				return nil
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created node %s on %s (at most %d cards)\n", x.Node, x.PubSub, x.MaxItems)
			return nil
		},
	}
	create.Flags().StringVarP(&path, "config", "c", "/etc/burrow/burrow.yaml", "a member's configuration file, with its rendezvous.xmpp section")
	create.Flags().StringVar(&admin, "jid", "", "log in as this account instead of the configuration's (an admin of the server)")
	create.Flags().StringVar(&passwordFile, "password-file", "", "file holding the password of --jid")
	cmd := &cobra.Command{
		Use:   "xmpp",
		Short: "Manage the XMPP rendezvous server's side of a network",
	}
	cmd.AddCommand(create)
	rootCmd.AddCommand(cmd)
}
