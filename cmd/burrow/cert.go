package main

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"burrow/identity"
	"burrow/node"
)

// certBackdate starts a new certificate's validity slightly in the past so
// that peers whose clocks lag a little accept it right away.
const certBackdate = time.Minute

func init() { rootCmd.AddCommand(newCertCmd()) }

// newCertCmd builds a fresh "cert" command tree with its own flag variables,
// so that tests can run it repeatedly without stale flag values.
func newCertCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cert",
		Short: "Sign, inspect and revoke node certificates",
		Long: `A node certificate admits one node key into a network. The network's CA
signs it; peers check it during every handshake. A revocation, signed by the
CA too, cuts a node key off for good: every member that learns of it drops
its links to that node and refuses its handshakes.`,
		Example: `  burrow cert sign --ca ./burrow-ca --name laptop --public-key KEY --out laptop.crt
  burrow cert show laptop.crt --ca-cert ./burrow-ca/ca.crt
  burrow cert revoke --ca ./burrow-ca laptop --push`,
	}
	cmd.AddCommand(newCertSignCmd(), newCertShowCmd(), newCertRevokeCmd())
	return cmd
}

func newCertSignCmd() *cobra.Command {
	var (
		caDir, name, publicKey, stateDir, out string
		addresses, groups                     []string
		valid                                 time.Duration
		force, router                         bool
	)
	cmd := &cobra.Command{
		Use:   "sign --ca DIR --name NAME (--public-key BASE64 | --state DIR) --out FILE",
		Short: "Sign a certificate admitting a node into the network",
		Long: `Sign a certificate with the CA in DIR (made by 'burrow ca init') for the node
whose public key is given by --public-key (as printed by 'burrow key show' on
the node) or read from the node key in --state on this machine.

The certificate names the node, may fix up to 8 virtual addresses (with their
subnet's prefix length) and up to 8 groups, and is valid from now for
--valid. It is written to --out (mode 0600); an existing file is replaced only
with --force.

--router marks a node that forwards frames for a LAN or hosts behind it
(tap.bridge with hosts that take addresses without its DHCP): it may send
frames from addresses of the DHCP range, and of the container subnet
ranges, that no lease or subnet claim gives to anyone. Other members drop
such frames from a node without it (counted as "unheld" in 'burrow status').
The mark is group "router" in the certificate. A copy stays in DIR/issued/NAME.crt, so that 'burrow cert
revoke' can find the node by its name.`,
		Example: `  burrow cert sign --ca ./burrow-ca --name laptop \
      --public-key A7e0o8tLY398zIKIlaRJh/hUz62kMiqH38zITUBMqhA= \
      --address 10.0.0.1/24 --group admins --out laptop.crt
  burrow cert sign --ca ./burrow-ca --name office-gw --state /var/lib/burrow \
      --router --out /var/lib/burrow/node.crt
  burrow cert sign --ca ./burrow-ca --name gateway --state /var/lib/burrow \
      --valid 720h --out /var/lib/burrow/node.crt --force`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if router && !slices.Contains(groups, node.RouterGroup) {
				groups = append(groups, node.RouterGroup)
			}
			switch {
			case caDir == "":
				return errors.New("--ca is required: the CA directory made by 'burrow ca init', e.g. --ca ./burrow-ca")
			case name == "":
				return errors.New("--name is required: the node's name, e.g. --name laptop")
			case out == "":
				return errors.New("--out is required: the certificate file to write, e.g. --out laptop.crt")
			case valid <= 0:
				return fmt.Errorf("--valid must be positive, e.g. --valid 8760h (got %s)", valid)
			case len(addresses) > identity.MaxAddresses:
				return fmt.Errorf("%d addresses given; a certificate holds at most %d", len(addresses), identity.MaxAddresses)
			case len(groups) > identity.MaxGroups:
				return fmt.Errorf("%d groups given; a certificate holds at most %d", len(groups), identity.MaxGroups)
			}
			if err := identity.CheckNodeName(name); err != nil {
				return fmt.Errorf("--name: %v", err)
			}
			for _, g := range groups {
				if err := identity.CheckGroupName(g); err != nil {
					return fmt.Errorf("--group: %v", err)
				}
			}
			prefixes, err := parseCertAddresses(addresses)
			if err != nil {
				return err
			}
			subject, err := certSubjectKey(publicKey, stateDir)
			if err != nil {
				return err
			}
			if !force {
				if _, err := os.Lstat(out); err == nil {
					return fmt.Errorf("%s already exists; pass --force to replace it", out)
				}
			}
			ca, err := identity.LoadCA(caDir)
			if errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("no CA in %s (%v); create one with: burrow ca init --network NAME --dir %s", caDir, err, caDir)
			} else if err != nil {
				return fmt.Errorf("cannot load the CA from %s: %v", caDir, err)
			}
			now := time.Now()
			cert, err := identity.SignCertificate(ca, identity.Certificate{
				Name:      name,
				PublicKey: subject,
				Addresses: prefixes,
				Groups:    groups,
				NotBefore: now.Add(-certBackdate),
				NotAfter:  now.Add(valid),
			})
			if err != nil {
				return err
			}
			if err := identity.SaveCertificate(out, cert); err != nil {
				return fmt.Errorf("cannot write the certificate: %v", err)
			}
			if err := recordIssued(caDir, cert); err != nil {
				return fmt.Errorf("the certificate is in %s, but the CA's record of it is not: %v", out, err)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "Signed a certificate for %q in network %q, written to %s\n", cert.Name, cert.Network, out)
			fmt.Fprintf(w, "  node id:     %s\n", cert.ID())
			fmt.Fprintf(w, "  valid until: %s\n", cert.NotAfter.Format(time.RFC3339))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&caDir, "ca", "", "CA directory holding ca.key and ca.crt")
	f.StringVar(&name, "name", "", "node name: 1-64 characters of A-Z, a-z, 0-9, '.', '_' and '-'")
	f.StringVar(&publicKey, "public-key", "", "the node's public key in base64, as printed by 'burrow key show'")
	f.StringVar(&stateDir, "state", "", "read the public key from node.key in this state directory instead")
	f.StringSliceVar(&addresses, "address", nil, "fixed virtual address with prefix length, e.g. 10.0.0.1/24 (repeatable)")
	f.StringSliceVar(&groups, "group", nil, "group the node belongs to (repeatable)")
	f.BoolVar(&router, "router", false, "let the node forward frames for a LAN behind it (adds group \""+node.RouterGroup+"\")")
	f.DurationVar(&valid, "valid", 365*24*time.Hour, "how long the certificate stays valid")
	f.StringVar(&out, "out", "", "certificate file to write")
	f.BoolVar(&force, "force", false, "replace --out if it exists")
	return cmd
}

// certSubjectKey returns the public key to certify from exactly one of
// --public-key and --state.
func certSubjectKey(publicKey, stateDir string) ([32]byte, error) {
	switch {
	case publicKey != "" && stateDir != "":
		return [32]byte{}, errors.New("give either --public-key or --state, not both")
	case publicKey != "":
		raw, err := base64.StdEncoding.DecodeString(publicKey)
		if err != nil || len(raw) != 32 {
			return [32]byte{}, fmt.Errorf("--public-key %q is not a base64 X25519 public key; copy it from 'burrow key show' on the node", publicKey)
		}
		return [32]byte(raw), nil
	case stateDir != "":
		key, err := loadNodeKeyForCLI(stateDir)
		return key.Public, err
	}
	return [32]byte{}, errors.New("say which node to certify: --public-key KEY (from 'burrow key show' on the node) or --state DIR for this machine's key")
}

func parseCertAddresses(addresses []string) ([]netip.Prefix, error) {
	var prefixes []netip.Prefix
	for _, a := range addresses {
		p, err := netip.ParsePrefix(a)
		if err != nil {
			return nil, fmt.Errorf("--address %q is not an address with prefix length, e.g. 10.0.0.1/24", a)
		}
		prefixes = append(prefixes, p)
	}
	return prefixes, nil
}

func newCertShowCmd() *cobra.Command {
	var (
		caCert string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "show FILE [--ca-cert ca.crt] [--json]",
		Short: "Print a certificate, and check it against a CA",
		Long: `Print the fields of a node certificate and the node ID it certifies. With
--ca-cert, also check that the CA signed it for its network and that it is
valid now; the command then fails when it is not.`,
		Example: `  burrow cert show laptop.crt
  burrow cert show /var/lib/burrow/node.crt --ca-cert /etc/burrow/ca.crt --json`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("give exactly one certificate file, e.g. burrow cert show laptop.crt (got %d arguments)", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			cert, err := identity.LoadCertificate(path)
			if err != nil {
				return fmt.Errorf("cannot read the certificate: %v", err)
			}
			var verifyErr error
			if caCert != "" {
				trust, err := identity.LoadTrust(caCert)
				if err != nil {
					return fmt.Errorf("cannot read the CA certificate given by --ca-cert: %v", err)
				}
				verifyErr = trust.Verify(cert, time.Now())
			}
			view := newCertView(cert, caCert != "", verifyErr)
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(view); err != nil {
					return err
				}
			} else {
				view.print(cmd.OutOrStdout())
			}
			if verifyErr != nil {
				return fmt.Errorf("%s does not verify against %s: %v; %s", path, caCert, verifyErr, verifyAdvice(verifyErr))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&caCert, "ca-cert", "", "CA certificate (ca.crt) to verify against")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of text")
	return cmd
}

// certView is what 'cert show' prints, as text or JSON.
type certView struct {
	Network   string   `json:"network"`
	Name      string   `json:"name"`
	NodeID    string   `json:"node_id"`
	PublicKey string   `json:"public_key"`
	Addresses []string `json:"addresses"`
	Groups    []string `json:"groups"`
	// Router: the node may forward frames for a LAN behind it.
	Router    bool      `json:"router"`
	NotBefore time.Time `json:"not_before"`
	NotAfter  time.Time `json:"not_after"`
	Issuer    string    `json:"issuer"`
	// Verified is set only when a CA was given.
	Verified    *bool  `json:"verified,omitempty"`
	VerifyError string `json:"verify_error,omitempty"`
}

func newCertView(c *identity.Certificate, checked bool, verifyErr error) certView {
	v := certView{
		Network:   c.Network,
		Name:      c.Name,
		NodeID:    c.ID().String(),
		PublicKey: base64.StdEncoding.EncodeToString(c.PublicKey[:]),
		Addresses: []string{},
		Groups:    append([]string{}, c.Groups...),
		Router:    slices.Contains(c.Groups, node.RouterGroup),
		NotBefore: c.NotBefore,
		NotAfter:  c.NotAfter,
		Issuer:    hex.EncodeToString(c.Issuer[:]),
	}
	for _, p := range c.Addresses {
		v.Addresses = append(v.Addresses, p.String())
	}
	if checked {
		ok := verifyErr == nil
		v.Verified = &ok
		if verifyErr != nil {
			v.VerifyError = verifyErr.Error()
		}
	}
	return v
}

func (v certView) print(w io.Writer) {
	orNone := func(list []string) string {
		if len(list) == 0 {
			return "none"
		}
		return strings.Join(list, ", ")
	}
	fmt.Fprintf(w, "network:     %s\n", v.Network)
	fmt.Fprintf(w, "name:        %s\n", v.Name)
	fmt.Fprintf(w, "node id:     %s\n", v.NodeID)
	fmt.Fprintf(w, "public key:  %s\n", v.PublicKey)
	fmt.Fprintf(w, "addresses:   %s\n", orNone(v.Addresses))
	fmt.Fprintf(w, "groups:      %s\n", orNone(v.Groups))
	if v.Router {
		fmt.Fprintln(w, "router:      yes, may forward frames for a LAN behind it")
	} else {
		fmt.Fprintln(w, "router:      no")
	}
	fmt.Fprintf(w, "valid from:  %s\n", v.NotBefore.Format(time.RFC3339))
	fmt.Fprintf(w, "valid until: %s\n", v.NotAfter.Format(time.RFC3339))
	// The first 16 digits are the CA fingerprint that 'burrow ca init' printed.
	fmt.Fprintf(w, "issuer:      %s\n", v.Issuer)
	switch {
	case v.Verified == nil:
	case *v.Verified:
		fmt.Fprintln(w, "verified:    yes, valid now")
	default:
		fmt.Fprintf(w, "verified:    NO: %s\n", v.VerifyError)
	}
}

// verifyAdvice says how to fix a failed verification.
func verifyAdvice(err error) string {
	switch {
	case errors.Is(err, identity.ErrExpired):
		return "sign a new certificate with 'burrow cert sign'"
	case errors.Is(err, identity.ErrNotYetValid):
		return "check this machine's clock, or wait until the certificate starts"
	case errors.Is(err, identity.ErrUnknownIssuer), errors.Is(err, identity.ErrWrongNetwork):
		return "it belongs to another network's CA; check --ca-cert"
	}
	return "the file is corrupted or forged; sign a new certificate with 'burrow cert sign'"
}
