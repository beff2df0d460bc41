package main

import (
	"bufio"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"burrow/identity"
)

func init() { rootCmd.AddCommand(newInviteCmd()) }

// acceptedInvitesFile, in the CA directory, records each accepted invite so
// that it admits one node only.
const acceptedInvitesFile = "invites-accepted"

const enrollmentHelp = `Joining a network takes three copy-and-pastes; the CA key never leaves the
CA machine and the node key never leaves the node:

  1. CA machine:  burrow invite --ca DIR --name NAME ...      prints an INVITE
  2. new node:    burrow join INVITE                          prints a REQUEST
  3. CA machine:  burrow invite accept REQUEST --ca DIR       prints a CERT
  4. new node:    burrow join --cert CERT, then burrow up

The invite carries the network's CA certificate, the node's name and
addresses, bootstrap contacts, beacons and an expiry, signed with the CA key: nobody
can change them on the way, and 'invite accept' certifies exactly what the
invite says. The invite holds no secret, but whoever holds it can send a
request: before accepting, compare the node ID that 'invite accept' shows
with the one 'burrow join' printed on the new node. Each invite is accepted
for one node only (recorded in DIR/invites-accepted).`

func newInviteCmd() *cobra.Command {
	var (
		caDir     string
		name      string
		addresses []string
		bootstrap []string
		beacons   []string
		valid     time.Duration
		certValid time.Duration
	)
	cmd := &cobra.Command{
		Use:   "invite --ca DIR --name NAME [--address ADDR]... [--bootstrap HOST:PORT]... [--beacon HOST:PORT[,URL]]...",
		Short: "Invite a new node into the network (run where the CA key is)",
		Long:  "Print a one-line invite for a new node.\n\n" + enrollmentHelp,
		Example: `  burrow invite --ca /secure/home-ca --name beta --address 10.10.0.2/24 \
      --bootstrap 203.0.113.10:51820
  burrow invite --ca ./ca --name sensor-7 --beacon 203.0.113.10:51820,wss://203.0.113.10/burrow --valid 1h --cert-valid 720h
  burrow invite accept REQUEST --ca /secure/home-ca`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case caDir == "":
				return errors.New("--ca is required: the CA directory (with ca.key), e.g. --ca /etc/burrow/ca")
			case name == "":
				return errors.New("--name is required: the new node's name, e.g. --name beta")
			case valid <= 0:
				return fmt.Errorf("--valid must be positive, e.g. --valid 72h (got %s)", valid)
			case certValid <= 0:
				return fmt.Errorf("--cert-valid must be positive, e.g. --cert-valid 8760h (got %s)", certValid)
			case len(addresses) > identity.MaxAddresses:
				return fmt.Errorf("%d addresses given; a certificate holds at most %d", len(addresses), identity.MaxAddresses)
			}
			if err := identity.CheckNodeName(name); err != nil {
				return fmt.Errorf("--name: %v", err)
			}
			prefixes, err := parseCertAddresses(addresses)
			if err != nil {
				return err
			}
			first, err := parseContacts(bootstrap, beacons)
			if err != nil {
				return err
			}
			ca, err := loadCAForCLI(caDir)
			if err != nil {
				return err
			}
			inv, err := newInvite(ca, name, prefixes, first, time.Now().Add(valid), certValid)
			if err != nil {
				return err
			}
			if len(first.bootstrap) == 0 && len(first.beacons) == 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "warning: no --bootstrap or --beacon given: the new node will know no member to join through until overlay.bootstrap or beacons is set in its configuration")
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "Invite for node %q of network %q, usable until %s.\n", name, ca.Network, inv.expires.Format(time.RFC3339))
			fmt.Fprintf(w, "On the new node, as root, run:\n\n  burrow join %s\n\n", encodeInvite(inv))
			fmt.Fprintf(w, "Then accept the request it prints: burrow invite accept REQUEST --ca %s\n", caDir)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&caDir, "ca", "", "CA directory holding ca.key and ca.crt")
	f.StringVar(&name, "name", "", "the new node's name: 1-64 characters of A-Z, a-z, 0-9, '.', '_' and '-'")
	f.StringSliceVar(&addresses, "address", nil, "the new node's virtual address with prefix length, e.g. 10.10.0.2/24 (repeatable)")
	f.StringSliceVar(&bootstrap, "bootstrap", nil, "address:port of a member the new node joins through (repeatable)")
	f.StringArrayVar(&beacons, "beacon", nil, "address:port of a beacon, optionally ,ws(s)://URL for networks that let only HTTPS out (repeatable)")
	f.DurationVar(&valid, "valid", 72*time.Hour, "how long the invite can be used")
	f.DurationVar(&certValid, "cert-valid", 365*24*time.Hour, "how long the new node's certificate stays valid")
	cmd.AddCommand(newInviteAcceptCmd())
	return cmd
}

func newInviteAcceptCmd() *cobra.Command {
	var caDir string
	cmd := &cobra.Command{
		Use:   "accept REQUEST --ca DIR",
		Short: "Certify a new node that answered an invite",
		Long: `Check a join request printed by 'burrow join' — it must hold an unexpired
invite that this CA signed and no other node has used — and print the
certificate for the new node's key, with the name and addresses of the
invite. Compare the node ID shown here with the one 'burrow join' printed.

` + enrollmentHelp,
		Example: `  burrow invite accept UgEAh... --ca /secure/home-ca`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("give exactly one join request, as printed by 'burrow join' on the new node (got %d arguments)", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if caDir == "" {
				return errors.New("--ca is required: the CA directory (with ca.key) that issued the invite")
			}
			req, err := decodeRequest(args[0])
			if err != nil {
				return err
			}
			ca, err := loadCAForCLI(caDir)
			if err != nil {
				return err
			}
			now := time.Now()
			if err := req.invite.verify(ca, now); err != nil {
				return err
			}
			ledger := filepath.Join(caDir, acceptedInvitesFile)
			again, err := checkInviteUnused(ledger, req)
			if err != nil {
				return err
			}
			inv := req.invite
			cert, err := identity.SignCertificate(ca, identity.Certificate{
				Name: inv.name, PublicKey: req.publicKey, Addresses: inv.addresses,
				NotBefore: now.Add(-certBackdate), NotAfter: now.Add(inv.certValid),
			})
			if err != nil {
				return err
			}
			if err := recordIssued(caDir, cert); err != nil {
				return fmt.Errorf("cannot keep a copy of the certificate in %s: %v", caDir, err)
			}
			if !again {
				if err := recordInvite(ledger, req, now); err != nil {
					return fmt.Errorf("cannot record the accepted invite in %s: %v", ledger, err)
				}
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "Certified node %q of network %q, valid until %s\n", cert.Name, cert.Network, cert.NotAfter.Format(time.RFC3339))
			fmt.Fprintf(w, "  node id: %s  (must match what 'burrow join' printed)\n", cert.ID())
			if again {
				fmt.Fprintln(w, "  (this request was accepted before; this is a fresh certificate for the same key)")
			}
			fmt.Fprintf(w, "On the new node, run:\n\n  burrow join --cert %s\n", encodeCertToken(cert))
			return nil
		},
	}
	cmd.Flags().StringVar(&caDir, "ca", "", "CA directory holding ca.key and ca.crt")
	return cmd
}

// loadCAForCLI loads a CA with its key, turning failures into advice.
func loadCAForCLI(dir string) (*identity.CA, error) {
	ca, err := identity.LoadCA(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no CA in %s (%v); point --ca at the directory 'burrow init --ca' or 'burrow ca init' made", dir, err)
	} else if err != nil {
		return nil, fmt.Errorf("cannot load the CA from %s: %v", dir, err)
	}
	return ca, nil
}

// checkInviteUnused reads the ledger of accepted invites. An invite used
// by another key is refused; again reports that this same request was
// accepted before, which is allowed so that a lost certificate can be
// issued anew.
func checkInviteUnused(ledger string, req joinRequest) (again bool, err error) {
	f, err := os.Open(ledger)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	defer f.Close()
	id := hex.EncodeToString(req.invite.id[:])
	key := base64.StdEncoding.EncodeToString(req.publicKey[:])
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 4 || fields[0] != id {
			continue
		}
		if fields[1] == key {
			return true, nil
		}
		return false, fmt.Errorf("this invite was already accepted on %s for another node (key %s); each invite admits one node: issue a new one with 'burrow invite'", fields[3], fields[1])
	}
	return false, s.Err()
}

func recordInvite(ledger string, req joinRequest, now time.Time) error {
	f, err := os.OpenFile(ledger, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "%s %s %s %s\n", hex.EncodeToString(req.invite.id[:]),
		base64.StdEncoding.EncodeToString(req.publicKey[:]), req.invite.name, now.UTC().Format(time.RFC3339))
	return errors.Join(err, f.Close())
}
