package main

import (
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"burrow/config"
	"burrow/identity"
)

func init() { rootCmd.AddCommand(newJoinCmd()) }

func newJoinCmd() *cobra.Command {
	var (
		setup   setupFlags
		certArg string
		force   bool
	)
	cmd := &cobra.Command{
		Use:   "join INVITE | join --cert CERT",
		Short: "Join a network with an invite from its CA",
		Long: `With an INVITE (from 'burrow invite' on the CA machine): write the network's
CA certificate and a commented configuration, create this node's key, and
print a join REQUEST to take back to the CA machine. Nothing that exists is
overwritten. Check that the CA fingerprint printed here is the one the CA
operator sees ('burrow ca init' and 'burrow init --ca' printed it).

With --cert CERT (the token 'burrow invite accept' printed, or a certificate
file from 'burrow cert sign'): check that the certificate belongs to this
node's key and the network's CA, and install it. The node is then ready for
'burrow up'.

` + enrollmentHelp,
		Example: `  burrow join AUkBAKQBYnVycm93...
  burrow join --cert Q0EBAQ...
  # a second network beside the first, run by burrow@lab.service
  burrow join --instance lab --listen '[::]:51821' AUkBAKQB...
  burrow join --instance lab --cert Q0EBAQ...`,
		Args: func(_ *cobra.Command, args []string) error {
			switch {
			case certArg != "" && len(args) > 0:
				return errors.New("give either an invite or --cert, not both: the invite comes first, the certificate after 'burrow invite accept'")
			case certArg == "" && len(args) != 1:
				return fmt.Errorf("give exactly one invite, as printed by 'burrow invite' on the CA machine (got %d arguments)", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if certArg != "" {
				return installCert(cmd.OutOrStdout(), setup, certArg, force)
			}
			inv, err := decodeInvite(args[0])
			if err != nil {
				return err
			}
			if time.Now().After(inv.expires) {
				return fmt.Errorf("the invite expired at %s; ask the CA for a new one", inv.expires.Format(time.RFC3339))
			}
			l, err := setup.layout(inv.ca.Network, inv.first)
			if err != nil {
				return err
			}
			if err := refuseExisting([]string{l.ConfigPath, l.CACert, l.Cert, l.nodeKeyPath()},
				"This machine is already set up for a network there: move those files away, or join beside it with --instance NAME (and its own --listen port)."); err != nil {
				return err
			}
			var created createdFiles
			if err = joinWithInvite(cmd.OutOrStdout(), setup, l, inv, &created); err != nil {
				created.undo()
			}
			return err
		},
	}
	setup.register(cmd)
	f := cmd.Flags()
	f.StringVar(&certArg, "cert", "", "finish joining: the certificate token from 'burrow invite accept', or a certificate file")
	f.BoolVar(&force, "force", false, "with --cert: replace an installed certificate (renewal)")
	return cmd
}

// joinWithInvite writes the node's files from an invite and prints the
// request for the CA.
func joinWithInvite(out io.Writer, setup setupFlags, l nodeLayout, inv *invite, created *createdFiles) error {
	caPEM := pem.EncodeToMemory(&pem.Block{Type: caCertPEMType, Bytes: inv.caCert})
	if err := writeNewFile(l.CACert, caPEM, 0o644, 0o755); err != nil {
		return fmt.Errorf("cannot write the network certificate: %v", err)
	}
	created.add(l.CACert)
	key, _, err := identity.LoadOrCreateNodeKey(l.StateDir, rand.Reader)
	if err != nil {
		return fmt.Errorf("cannot create the node key in %s: %v", l.StateDir, err)
	}
	created.add(l.nodeKeyPath())
	if err := writeNewFile(l.ConfigPath, renderConfig(l), 0o644, 0o755); err != nil {
		return fmt.Errorf("cannot write the configuration: %v", err)
	}
	created.add(l.ConfigPath)
	fmt.Fprintf(out, "Joining network %q (CA fingerprint %s) as node %q\n", inv.ca.Network, inv.ca.Fingerprint(), inv.name)
	fmt.Fprintf(out, "Wrote %s and %s; created %s\n", l.ConfigPath, l.CACert, l.nodeKeyPath())
	fmt.Fprintf(out, "  node id: %s\n", key.ID())
	fmt.Fprintf(out, "On the CA machine, run:\n\n  burrow invite accept %s --ca CA_DIR\n\n", encodeRequest(joinRequest{invite: inv, publicKey: key.Public}))
	fmt.Fprintf(out, "then here: burrow join%s --cert CERT\n", setup.placeFlags())
	return nil
}

// installCert checks a certificate against this node's CA and key and
// writes it where the configuration expects it.
func installCert(out io.Writer, setup setupFlags, arg string, force bool) error {
	l, err := setup.layout("", contacts{})
	if err != nil {
		return err
	}
	cfg, err := config.Load(l.ConfigPath)
	if err != nil {
		return fmt.Errorf("%v; run 'burrow join INVITE' first (with the same --dir and --instance)", err)
	}
	cert, err := readCertArg(arg)
	if err != nil {
		return err
	}
	trust, err := identity.LoadTrust(cfg.CA)
	if err != nil {
		return fmt.Errorf("cannot read the network certificate: %v", err)
	}
	if err := trust.Verify(cert, time.Now()); err != nil {
		return fmt.Errorf("the certificate does not fit this node's network: %v; %s", err, verifyAdvice(err))
	}
	key, err := loadNodeKeyForCLI(cfg.StateDir)
	if err != nil {
		return err
	}
	if cert.PublicKey != key.Public {
		return fmt.Errorf("the certificate is for node %s, but this node's key (%s) is %s: it answers another join request; accept this node's request with 'burrow invite accept'",
			cert.ID(), filepath.Join(cfg.StateDir, identity.NodeKeyFile), key.ID())
	}
	if !force {
		if err := refuseExisting([]string{cfg.Cert}, "A certificate is installed already; pass --force to replace it (e.g. to renew it)."); err != nil {
			return err
		}
	}
	if err := identity.SaveCertificate(cfg.Cert, cert); err != nil {
		return fmt.Errorf("cannot write the certificate: %v", err)
	}
	fmt.Fprintf(out, "Installed the certificate of node %q (id %s) in %s, valid until %s\n",
		cert.Name, cert.ID(), cfg.Cert, cert.NotAfter.Format(time.RFC3339))
	fmt.Fprintf(out, "Start the node: burrow up -c %s", l.ConfigPath)
	if l.Instance != "" {
		fmt.Fprintf(out, "   (or: systemctl enable --now burrow@%s)\n", l.Instance)
	} else {
		fmt.Fprintln(out, "   (or: systemctl enable --now burrow)")
	}
	return nil
}

// readCertArg takes a certificate file when arg names one, else a token.
func readCertArg(arg string) (*identity.Certificate, error) {
	if _, err := os.Stat(arg); err == nil {
		cert, err := identity.LoadCertificate(arg)
		if err != nil {
			return nil, fmt.Errorf("cannot read the certificate: %v", err)
		}
		return cert, nil
	}
	return decodeCertToken(arg)
}
