package main

import (
	crand "crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"burrow/config"
	"burrow/identity"
	"burrow/runtime"
	published "burrow/runtime/publish"
)

// publishedDir holds, in a CA directory, every publication the CA signed
// and their revocations, by serial.
const publishedDir = "published"

const (
	publicationExt           = ".pub"
	publicationRevocationExt = ".pubrev"
)

func init() { rootCmd.AddCommand(newPublishCmd()) }

func newPublishCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "publish",
		Short: "Expose a member's TCP service to non-members through a gateway member",
		Long: `A publication lets anyone, member or not, reach one TCP service of a member
(even one behind a NAT) at an address of another member, the gateway, which
relays each connection byte for byte to the service inside the network. TLS
between the client and the service passes through untouched: the gateway
never holds the service's keys and cannot read the traffic.

Nothing is exposed by default. The CA signs each publication ('burrow publish
sign'), naming the member and port, the gateway and the address it listens
on; the gateway exposes it once it is listed under publish: in its
configuration (SIGHUP reads the list again) or handed to it with 'burrow
publish add'. 'burrow publish revoke' closes the listener and every open
connection of a publication as soon as the revocation reaches the gateway.
'burrow status' on the gateway lists what it exposes.`,
	}
	cmd.AddCommand(newPublishSignCmd(), newPublishAddCmd(), newPublishRevokeCmd())
	return cmd
}

func newPublishSignCmd() *cobra.Command {
	var caDir, service, gateway, listen, address, out string
	var valid time.Duration
	cmd := &cobra.Command{
		Use:   "sign --ca DIR --service NODE:PORT --on GATEWAY --listen ADDR:PORT [--valid D] [--out FILE]",
		Short: "Sign a publication of a member's TCP service on a gateway",
		Long: `Sign, with the CA in DIR, a publication of TCP port PORT of member NODE,
exposed by member GATEWAY on ADDR:PORT, an address of the gateway's machine
that the clients can reach.

NODE and GATEWAY are names the CA signed (found in DIR/issued) or
certificate files. The gateway connects to the member's fixed address from
its certificate, or to --address when the member has none (a DHCP lease,
say): the CA signs the exact destination, and the gateway dials nothing
else. The gateway reaches it through its TAP, so it needs an address in the
network.

The publication is written to --out (default DIR/published/SERIAL.pub);
hand it to the gateway: list it under publish: in its configuration, or run
'burrow publish add FILE' there.`,
		Example: `  burrow publish sign --ca ./burrow-ca --service board:8443 --on gateway --listen 203.0.113.7:443
  burrow publish sign --ca ./burrow-ca --service board:22 --address 10.0.0.23 --on gateway --listen 203.0.113.7:2222 --valid 24h --out ssh.pub`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if caDir == "" {
				return errors.New("--ca is required: the CA directory made by 'burrow ca init', e.g. --ca ./burrow-ca")
			}
			ca, err := loadCAForCLI(caDir)
			if err != nil {
				return err
			}
			p, err := publicationTemplate(ca, caDir, service, address, gateway, listen, time.Now())
			if err != nil {
				return err
			}
			pub, err := identity.SignPublication(ca, p, time.Now(), valid, crand.Reader)
			if err != nil {
				return err
			}
			if out == "" {
				out = filepath.Join(caDir, publishedDir, pub.SerialString()+publicationExt)
				if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
					return err
				}
			}
			if err := identity.SavePublication(out, pub); err != nil {
				return fmt.Errorf("cannot write the publication: %v", err)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "Published %s's %s on %s, through gateway %q, until %s (serial %s); the publication is in %s\n",
				pub.MemberName, pub.Service, pub.Listen, pub.GatewayName, pub.NotAfter.Format(time.RFC3339), pub.SerialString(), out)
			fmt.Fprintf(w, "Hand it to the gateway: list it under publish: in its configuration and send it SIGHUP, or run there: burrow publish add %s\n", filepath.Base(out))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&caDir, "ca", "", "CA directory holding ca.key and ca.crt")
	f.StringVar(&service, "service", "", "the member and TCP port to publish: NODE:PORT, NODE a node name the CA signed or a certificate file")
	f.StringVar(&address, "address", "", "the member's address inside the network, when its certificate has no fixed one")
	f.StringVar(&gateway, "on", "", "the gateway member that exposes the service: a node name the CA signed or a certificate file")
	f.StringVar(&listen, "listen", "", "address:port on the gateway's machine where clients connect, e.g. 203.0.113.7:443")
	f.DurationVar(&valid, "valid", 90*24*time.Hour, "how long the publication stays valid")
	f.StringVar(&out, "out", "", "publication file to write (default DIR/published/SERIAL.pub)")
	return cmd
}

// publicationTemplate checks the sign command's arguments and makes the
// publication to sign from them.
func publicationTemplate(ca *identity.CA, caDir, service, address, gateway, listen string, now time.Time) (identity.Publication, error) {
	var p identity.Publication
	node, port, ok := cutLast(service, ":")
	if service == "" || !ok || node == "" {
		return p, fmt.Errorf("--service %q: give the member and the TCP port as NODE:PORT, e.g. --service board:8443", service)
	}
	portNum, err := strconv.ParseUint(port, 10, 16)
	if err != nil || portNum == 0 {
		return p, fmt.Errorf("--service %q: %q is no TCP port (1-65535)", service, port)
	}
	member, err := certifiedMember(ca, caDir, node, "--service", now)
	if err != nil {
		return p, err
	}
	if gateway == "" {
		return p, errors.New("--on is required: the gateway member that exposes the service, e.g. --on gateway")
	}
	gw, err := certifiedMember(ca, caDir, gateway, "--on", now)
	if err != nil {
		return p, err
	}
	if gw.ID() == member.ID() {
		return p, fmt.Errorf("--on %s names the member itself; a member reached from outside needs no gateway", gateway)
	}
	var addr netip.Addr
	switch {
	case address != "":
		if addr, err = netip.ParseAddr(address); err != nil || addr.Zone() != "" || addr.IsUnspecified() {
			return p, fmt.Errorf("--address %q is no address such as 10.0.0.23", address)
		}
	case len(member.Addresses) > 0:
		addr = member.Addresses[0].Addr()
	default:
		return p, fmt.Errorf("--service %s: %q's certificate has no fixed address; give its address inside the network with --address", service, member.Name)
	}
	lap, err := netip.ParseAddrPort(listen)
	if err != nil || lap.Port() == 0 || lap.Addr().IsUnspecified() || lap.Addr().Zone() != "" {
		return p, fmt.Errorf("--listen %q: give the address:port on the gateway's machine where clients connect, e.g. 203.0.113.7:443 (not 0.0.0.0: a publication names one address)", listen)
	}
	return identity.Publication{
		Member: member.ID(), MemberName: member.Name, Service: netip.AddrPortFrom(addr.Unmap(), uint16(portNum)),
		Gateway: gw.ID(), GatewayName: gw.Name, Listen: netip.AddrPortFrom(lap.Addr().Unmap(), lap.Port()),
	}, nil
}

// certifiedMember finds the certificate arg (of flag) names and checks
// that this CA signed it and that it is valid now.
func certifiedMember(ca *identity.CA, caDir, arg, flag string, now time.Time) (*identity.Certificate, error) {
	c, err := issuedCertificate(caDir, arg, "")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	if err := ca.Verify(c, now); err != nil {
		return nil, fmt.Errorf("%s %s: %w", flag, arg, err)
	}
	return c, nil
}

func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return s, "", false
}

func newPublishAddCmd() *cobra.Command {
	var socket string
	cmd := &cobra.Command{
		Use:   "add FILE",
		Short: "Have the gateway running on this machine expose a publication now",
		Long: `Hand a publication file (from 'burrow publish sign') to the node running on
this machine, which must be the gateway it names. The node checks the CA's
signature, that it is the gateway, the expiry and that the publication was
not revoked, then opens the listener. It exposes the publication until it is
revoked, expires or the node stops; to keep it across restarts, list the file
under publish: in the configuration.`,
		Example: `  burrow publish add board-https.pub`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := identity.LoadPublication(args[0])
			if err != nil {
				return err
			}
			resp, err := runtime.Query(socket, runtime.Request{Command: "publish-add", Publication: p.Marshal()})
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			st := resp.Published
			fmt.Fprintf(cmd.OutOrStdout(), "Exposing %s's %s on %s until %s (serial %s)\n", st.Member, st.Service, st.Listen, st.NotAfter.Format(time.RFC3339), st.Serial)
			return nil
		},
	}
	cmd.Flags().StringVar(&socket, "socket", config.DefaultControlSocket, "control socket of the local node")
	return cmd
}

var serialPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

func newPublishRevokeCmd() *cobra.Command {
	var caDir, out, socket string
	var push bool
	cmd := &cobra.Command{
		Use:   "revoke --ca DIR (SERIAL | FILE) [--out FILE] [--push]",
		Short: "Revoke a publication: its gateway closes the listener and every connection",
		Long: `Sign, with the CA in DIR, the revocation of one publication, named by its
serial (as 'burrow publish sign' and 'burrow status' print it; found in
DIR/published) or by its file.

The revocation is written to --out (default DIR/published/SERIAL.pubrev).
Hand it to the gateway: --push gives it to the node running on this machine
(over --socket), e.g. when you run this on the gateway; or copy the file
into the gateway's state directory, under revoked-publications/ (e.g.
/var/lib/burrow/revoked-publications/), where it is picked up within 2
seconds. The gateway closes the publication's listener and every connection
it carries at once, keeps the revocation in its state directory and refuses
the publication from then on, across restarts. Removing the file from the gateway's publish: list and
sending SIGHUP also closes it, but only a revocation stops it coming back.`,
		Example: `  burrow publish revoke --ca ./burrow-ca 3f1c0e5e4b2a49d7a1c2b3d4e5f60718 --push
  burrow publish revoke --ca ./burrow-ca board-https.pub --out board-https.pubrev`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if caDir == "" {
				return errors.New("--ca is required: the CA directory made by 'burrow ca init', e.g. --ca ./burrow-ca")
			}
			ca, err := loadCAForCLI(caDir)
			if err != nil {
				return err
			}
			p, err := publicationByArg(caDir, args[0])
			if err != nil {
				return err
			}
			rev, err := identity.SignPublicationRevocation(ca, p, time.Now())
			if err != nil {
				return err
			}
			if out == "" {
				out = filepath.Join(caDir, publishedDir, p.SerialString()+publicationRevocationExt)
				if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
					return err
				}
			}
			if err := identity.SavePublicationRevocation(out, rev); err != nil {
				return fmt.Errorf("cannot write the revocation: %v", err)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "Revoked publication %s (%s's %s on %s); the revocation is in %s\n", p.SerialString(), p.MemberName, p.Service, p.Listen, out)
			if !push {
				fmt.Fprintf(w, "Hand it to gateway %q: burrow publish revoke ... --push there, or copy it into its %s directory\n",
					p.GatewayName, filepath.Join(config.DefaultStateDir, published.RevokedDir))
				return nil
			}
			resp, err := runtime.Query(socket, runtime.Request{Command: "publish-revoke", Publication: rev.Marshal()})
			if err != nil {
				return fmt.Errorf("the revocation is written, but the local node did not take it: %w", err)
			}
			reportClosed(w, resp.Published)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&caDir, "ca", "", "CA directory holding ca.key and ca.crt")
	f.StringVar(&out, "out", "", "revocation file to write (default DIR/published/SERIAL.pubrev)")
	f.BoolVar(&push, "push", false, "hand the revocation to the node running on this machine, the publication's gateway")
	f.StringVar(&socket, "socket", config.DefaultControlSocket, "control socket of the local node, for --push")
	return cmd
}

func reportClosed(w io.Writer, st *published.Status) {
	if st == nil {
		fmt.Fprintln(w, "The local node was not exposing it; it will refuse it from now on.")
		return
	}
	fmt.Fprintf(w, "The local node closed %s; open connections cut: %d (%d accepted, %d bytes in, %d out).\n", st.Listen, st.Open, st.Accepted, st.BytesIn, st.BytesOut)
}

// publicationByArg loads the publication a serial (kept in the CA
// directory) or a file names.
func publicationByArg(caDir, arg string) (*identity.Publication, error) {
	if serialPattern.MatchString(arg) {
		p, err := identity.LoadPublication(filepath.Join(caDir, publishedDir, arg+publicationExt))
		if !errors.Is(err, fs.ErrNotExist) {
			return p, err
		}
	}
	p, err := identity.LoadPublication(arg)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%q is no serial of a publication the CA in %s signed (no %s) and no publication file",
			arg, caDir, filepath.Join(caDir, publishedDir, arg+publicationExt))
	}
	return p, err
}
