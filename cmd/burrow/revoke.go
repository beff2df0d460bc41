package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"burrow/config"
	"burrow/identity"
	"burrow/nid"
	"burrow/runtime"
)

// issuedDir holds, in a CA directory, a copy of every certificate the CA
// signed, by node name.
const issuedDir = "issued"

// recordIssued keeps a copy of cert in the CA directory.
func recordIssued(caDir string, cert *identity.Certificate) error {
	dir := filepath.Join(caDir, issuedDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return identity.SaveCertificate(filepath.Join(dir, cert.Name+".crt"), cert)
}

func newCertRevokeCmd() *cobra.Command {
	var caDir, out, socket string
	var push bool
	cmd := &cobra.Command{
		Use:   "revoke --ca DIR (NAME | NODE-ID | CERT-FILE) [--out FILE] [--push]",
		Short: "Revoke a node: every member cuts it off and refuses it from then on",
		Long: `Sign, with the CA in DIR, a revocation of one node key. The node is named by
the name the CA signed it under (found in DIR/issued, where 'burrow cert
sign' keeps a copy of each certificate), by its node ID (32 hex digits, as
'burrow cert sign', 'burrow status' and 'burrow peers' print it) or by its
certificate file.

The revocation is written to --out (default DIR/revoked/NODE-ID.rev). It is
final: the node needs a new key and certificate to come back.

To make it take effect, hand it to any one member: --push gives it to the
node running on this machine (over --socket); or copy the file into a
member's state directory, under revoked/ (e.g. /var/lib/burrow/revoked/),
where the member picks it up within 2 seconds. That member drops its links
to the revoked node and passes the revocation to its neighbours, which do
the same: within seconds no member links to the node or accepts its
handshakes, directly or through relays, beacons, TURN or WebSocket. Members
keep it in their state directories, and a member that was away learns it
from its first link back.`,
		Example: `  burrow cert revoke --ca ./burrow-ca laptop --push
  burrow cert revoke --ca ./burrow-ca 1e7088b6ab9d7f507ee8e7f7a29d1d98 --out laptop.rev
  scp laptop.rev gateway:/var/lib/burrow/revoked/`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if caDir == "" {
				return errors.New("--ca is required: the CA directory made by 'burrow ca init', e.g. --ca ./burrow-ca")
			}
			ca, err := loadCAForCLI(caDir)
			if err != nil {
				return err
			}
			id, name, err := revocationTarget(caDir, args[0])
			if err != nil {
				return err
			}
			rev, err := identity.SignRevocation(ca, id, name, time.Now())
			if err != nil {
				return err
			}
			if out == "" {
				out = filepath.Join(caDir, runtime.RevokedDir, id.String()+".rev")
				if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
					return err
				}
			}
			if err := identity.SaveRevocation(out, rev); err != nil {
				return fmt.Errorf("cannot write the revocation: %v", err)
			}
			w := cmd.OutOrStdout()
			who := id.String()
			if name != "" {
				who = fmt.Sprintf("%q (%s)", name, id)
			}
			fmt.Fprintf(w, "Revoked %s in network %q; the revocation is in %s\n", who, ca.Network, out)
			if !push {
				fmt.Fprintf(w, "Hand it to any member: burrow cert revoke ... --push on a member, or copy it into a member's %s directory\n", filepath.Join(config.DefaultStateDir, runtime.RevokedDir))
				return nil
			}
			resp, err := runtime.Query(socket, runtime.Request{Command: "revoke", Revocation: rev.Marshal()})
			if err != nil {
				return fmt.Errorf("the revocation is written, but the local node did not take it: %w", err)
			}
			if resp.Fresh {
				fmt.Fprintln(w, "The local node cut the node off and is passing the revocation on to every member.")
			} else {
				fmt.Fprintln(w, "The local node already knew this revocation; it has spread already.")
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&caDir, "ca", "", "CA directory holding ca.key and ca.crt")
	f.StringVar(&out, "out", "", "revocation file to write (default DIR/revoked/NODE-ID.rev)")
	f.BoolVar(&push, "push", false, "hand the revocation to the node running on this machine, which spreads it")
	f.StringVar(&socket, "socket", config.DefaultControlSocket, "control socket of the local node, for --push")
	return cmd
}

// revocationTarget finds the node a revoke argument names: a name the CA
// recorded, a node ID or a certificate file.
func revocationTarget(caDir, arg string) (nid.ID, string, error) {
	if id, err := nid.Parse(arg); err == nil {
		return id, "", nil
	}
	c, err := issuedCertificate(caDir, arg, ", no node ID (32 hex digits)")
	if err != nil {
		return nid.ID{}, "", err
	}
	return c.ID(), c.Name, nil
}

// issuedCertificate finds the certificate arg names: the CA's copy of the
// certificate of a node it signed under that name, or a certificate file.
// orElse says what else arg could have been, for the error (", no ...").
func issuedCertificate(caDir, arg, orElse string) (*identity.Certificate, error) {
	if identity.CheckNodeName(arg) == nil {
		path := filepath.Join(caDir, issuedDir, arg+".crt")
		if c, err := identity.LoadCertificate(path); err == nil {
			return c, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("the CA's copy of %q's certificate: %v", arg, err)
		}
	}
	c, err := identity.LoadCertificate(arg)
	if err == nil {
		return c, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%q is no node the CA in %s signed (no %s)%s and no certificate file",
			arg, caDir, filepath.Join(caDir, issuedDir, arg+".crt"), orElse)
	}
	return nil, fmt.Errorf("%s: %v", arg, err)
}
