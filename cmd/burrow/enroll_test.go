package main

import (
	"bytes"
	"encoding/base64"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"burrow/config"
	"burrow/identity"
)

// runSetupCLI runs burrow with args on freshly built commands, so no flag
// value survives from an earlier run, and returns what it printed.
func runSetupCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := &cobra.Command{Use: "burrow", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(newInitCmd(), newInviteCmd(), newJoinCmd(), newCACmd(), newKeyCmd(), newCertCmd())
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func mustRunSetupCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, err := runSetupCLI(t, args...)
	if err != nil {
		t.Fatalf("burrow %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// tokenAfter returns the word printed after prefix in a command's output,
// the way an operator copies it.
func tokenAfter(t *testing.T, out, prefix string) string {
	t.Helper()
	for line := range strings.SplitSeq(out, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
			return strings.Fields(rest)[0]
		}
	}
	t.Fatalf("no %q line in:\n%s", prefix, out)
	return ""
}

// machine is one machine's directories in a test.
type machine struct{ dir, state string }

func newMachine(t *testing.T) machine {
	root := t.TempDir()
	return machine{dir: filepath.Join(root, "etc"), state: filepath.Join(root, "state")}
}

func (m machine) flags() []string { return []string{"--dir", m.dir, "--state", m.state} }

func (m machine) caDir() string { return filepath.Join(m.dir, "ca") }

// checkMember loads the node's configuration as 'burrow up' would and
// checks that its certificate verifies against its CA for its key.
func checkMember(t *testing.T, configPath string) (*config.Config, *identity.Certificate) {
	t.Helper()
	cfg, err := config.Load(configPath)
	if err != nil {
		t.Fatalf("the written configuration does not load: %v", err)
	}
	ca, err := identity.LoadCAPublic(cfg.CA)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := identity.LoadCertificate(cfg.Cert)
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Verify(cert, time.Now()); err != nil {
		t.Fatalf("certificate does not verify: %v", err)
	}
	key, err := identity.LoadNodeKey(filepath.Join(cfg.StateDir, identity.NodeKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if cert.PublicKey != key.Public {
		t.Fatal("certificate is for another key than the node's")
	}
	if ca.Network != cfg.Network {
		t.Fatalf("CA network %q, config network %q", ca.Network, cfg.Network)
	}
	return cfg, cert
}

func TestInviteJoinAcceptMakesAMember(t *testing.T) {
	alpha, beta := newMachine(t), newMachine(t)
	mustRunSetupCLI(t, append(alpha.flags(), "init", "--network", "home", "--ca", "--name", "alpha", "--address", "10.10.0.1/24")...)

	out := mustRunSetupCLI(t, "invite", "--ca", alpha.caDir(), "--name", "beta", "--address", "10.10.0.2/24",
		"--bootstrap", "192.0.2.1:51820", "--bootstrap", "[2001:db8::1]:51820",
		"--beacon", "192.0.2.9:51820,wss://192.0.2.9/burrow", "--beacon", "192.0.2.10:51820")
	inviteToken := tokenAfter(t, out, "burrow join ")

	out = mustRunSetupCLI(t, append(beta.flags(), "join", inviteToken)...)
	requestToken := tokenAfter(t, out, "burrow invite accept ")
	joinID := tokenAfter(t, out, "node id:")
	if _, err := os.Stat(filepath.Join(beta.dir, "node.crt")); err == nil {
		t.Fatal("join wrote a certificate before the CA signed one")
	}

	out = mustRunSetupCLI(t, "invite", "accept", requestToken, "--ca", alpha.caDir())
	if acceptID := tokenAfter(t, out, "node id:"); acceptID != joinID {
		t.Fatalf("invite accept shows node id %s, join showed %s", acceptID, joinID)
	}
	certToken := tokenAfter(t, out, "burrow join --cert ")

	out = mustRunSetupCLI(t, append(beta.flags(), "join", "--cert", certToken)...)
	if !strings.Contains(out, "burrow up -c "+filepath.Join(beta.dir, "burrow.yaml")) {
		t.Errorf("join --cert does not say how to start the node:\n%s", out)
	}

	cfg, cert := checkMember(t, filepath.Join(beta.dir, "burrow.yaml"))
	wantBoot := []netip.AddrPort{netip.MustParseAddrPort("192.0.2.1:51820"), netip.MustParseAddrPort("[2001:db8::1]:51820")}
	if cfg.Network != "home" || !slices.Equal(cfg.Overlay.BootstrapAddrs, wantBoot) {
		t.Errorf("configuration: network %q, bootstrap %v", cfg.Network, cfg.Overlay.BootstrapAddrs)
	}
	var beacons []string
	for _, b := range cfg.Beacons {
		beacons = append(beacons, b.Addr.String()+" "+b.WebSocket)
	}
	if want := []string{"192.0.2.9:51820 wss://192.0.2.9/burrow", "192.0.2.10:51820 "}; !slices.Equal(beacons, want) {
		t.Errorf("configuration: beacons %q, want %q", beacons, want)
	}
	if cert.Name != "beta" || !slices.Equal(cert.Addresses, []netip.Prefix{netip.MustParsePrefix("10.10.0.2/24")}) || cert.ID().String() != joinID {
		t.Errorf("certificate %+v is not what the invite said", cert)
	}
	if d := time.Until(cert.NotAfter) - 365*24*time.Hour; d < -time.Minute || d > time.Minute {
		t.Errorf("certificate valid until %s, want a year from now", cert.NotAfter)
	}

	// Neither secret travelled: no token holds the node's private key, and
	// nothing on beta holds the CA key.
	key, _ := identity.LoadNodeKey(filepath.Join(cfg.StateDir, identity.NodeKeyFile))
	for _, tok := range []string{inviteToken, requestToken, certToken} {
		raw, _ := base64.RawURLEncoding.DecodeString(tok)
		if bytes.Contains(raw, key.Private[:]) {
			t.Error("a token carries the node's private key")
		}
	}
	caKey, _ := os.ReadFile(filepath.Join(alpha.caDir(), identity.CAKeyFile))
	filepath.WalkDir(filepath.Dir(beta.dir), func(path string, d os.DirEntry, err error) error {
		if data, _ := os.ReadFile(path); d != nil && !d.IsDir() && (bytes.Contains(data, []byte("CA KEY")) || bytes.Equal(data, caKey)) {
			t.Errorf("%s on the new node holds the CA key", path)
		}
		return nil
	})
}

func TestInviteAdmitsOneNodeOnly(t *testing.T) {
	alpha, beta, intruder := newMachine(t), newMachine(t), newMachine(t)
	mustRunSetupCLI(t, append(alpha.flags(), "init", "--network", "home", "--ca", "--name", "alpha")...)
	inviteToken := tokenAfter(t, mustRunSetupCLI(t, "invite", "--ca", alpha.caDir(), "--name", "beta"), "burrow join ")
	betaRequest := tokenAfter(t, mustRunSetupCLI(t, append(beta.flags(), "join", inviteToken)...), "burrow invite accept ")
	intruderRequest := tokenAfter(t, mustRunSetupCLI(t, append(intruder.flags(), "join", inviteToken)...), "burrow invite accept ")

	mustRunSetupCLI(t, "invite", "accept", betaRequest, "--ca", alpha.caDir())
	if _, err := runSetupCLI(t, "invite", "accept", intruderRequest, "--ca", alpha.caDir()); err == nil || !strings.Contains(err.Error(), "already accepted") {
		t.Fatalf("a second node used the same invite: %v", err)
	}
	// The same request again is the same node asking for its lost certificate.
	out := mustRunSetupCLI(t, "invite", "accept", betaRequest, "--ca", alpha.caDir())
	if !strings.Contains(out, "accepted before") {
		t.Errorf("repeated accept does not say so:\n%s", out)
	}
}

func TestJoinRefusesACertificateForAnotherNode(t *testing.T) {
	alpha, beta, gamma := newMachine(t), newMachine(t), newMachine(t)
	mustRunSetupCLI(t, append(alpha.flags(), "init", "--network", "home", "--ca", "--name", "alpha")...)
	join := func(m machine, name string) string {
		inv := tokenAfter(t, mustRunSetupCLI(t, "invite", "--ca", alpha.caDir(), "--name", name), "burrow join ")
		return tokenAfter(t, mustRunSetupCLI(t, append(m.flags(), "join", inv)...), "burrow invite accept ")
	}
	join(beta, "beta")
	gammaRequest := join(gamma, "gamma")
	gammaCert := tokenAfter(t, mustRunSetupCLI(t, "invite", "accept", gammaRequest, "--ca", alpha.caDir()), "burrow join --cert ")
	_, err := runSetupCLI(t, append(beta.flags(), "join", "--cert", gammaCert)...)
	if err == nil || !strings.Contains(err.Error(), "another join request") {
		t.Fatalf("beta installed gamma's certificate: %v", err)
	}
	mustRunSetupCLI(t, append(gamma.flags(), "join", "--cert", gammaCert)...)
	if _, err := runSetupCLI(t, append(gamma.flags(), "join", "--cert", gammaCert)...); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("a second install without --force: %v", err)
	}
	mustRunSetupCLI(t, append(gamma.flags(), "join", "--cert", gammaCert, "--force")...)
}

func TestJoinCertAcceptsACertificateFile(t *testing.T) {
	alpha, beta := newMachine(t), newMachine(t)
	mustRunSetupCLI(t, append(alpha.flags(), "init", "--network", "home", "--ca", "--name", "alpha")...)
	inv := tokenAfter(t, mustRunSetupCLI(t, "invite", "--ca", alpha.caDir(), "--name", "beta"), "burrow join ")
	mustRunSetupCLI(t, append(beta.flags(), "join", inv)...)
	certFile := filepath.Join(t.TempDir(), "beta.crt")
	mustRunSetupCLI(t, "cert", "sign", "--ca", alpha.caDir(), "--name", "beta", "--state", beta.state, "--out", certFile)
	mustRunSetupCLI(t, append(beta.flags(), "join", "--cert", certFile)...)
	checkMember(t, filepath.Join(beta.dir, "burrow.yaml"))
}

func TestAcceptRefusesAnotherCAsInvite(t *testing.T) {
	home, lab, beta := newMachine(t), newMachine(t), newMachine(t)
	mustRunSetupCLI(t, append(home.flags(), "init", "--network", "home", "--ca", "--name", "alpha")...)
	mustRunSetupCLI(t, append(lab.flags(), "init", "--network", "home", "--ca", "--name", "alpha")...)
	inv := tokenAfter(t, mustRunSetupCLI(t, "invite", "--ca", lab.caDir(), "--name", "beta"), "burrow join ")
	req := tokenAfter(t, mustRunSetupCLI(t, append(beta.flags(), "join", inv)...), "burrow invite accept ")
	if _, err := runSetupCLI(t, "invite", "accept", req, "--ca", home.caDir()); err == nil || !strings.Contains(err.Error(), "not by this CA") {
		t.Fatalf("a CA accepted another CA's invite: %v", err)
	}
}

func TestTamperedOrExpiredInviteIsRefused(t *testing.T) {
	m := newMachine(t)
	mustRunSetupCLI(t, append(m.flags(), "init", "--network", "home", "--ca", "--name", "alpha")...)
	ca, err := identity.LoadCA(m.caDir())
	if err != nil {
		t.Fatal(err)
	}
	inv, err := newInvite(ca, "beta", []netip.Prefix{netip.MustParsePrefix("10.10.0.2/24")}, contacts{}, time.Now().Add(time.Hour), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// Raise the address to another node's and reframe with a good checksum:
	// only the CA's signature can tell.
	body := inv.appendBody(nil)
	i := bytes.Index(body, []byte{4, 10, 10, 0, 2, 24})
	body[i+4] = 1
	if _, err := decodeInvite(encodeToken(kindInvite, body)); err == nil || !strings.Contains(err.Error(), "signature") {
		t.Fatalf("tampered invite: %v, want a signature error", err)
	}

	expired, err := newInvite(ca, "beta", nil, contacts{}, time.Now().Add(-time.Minute), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	_, err = runSetupCLI(t, append(newMachine(t).flags(), "join", encodeInvite(expired))...)
	if err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("join with an expired invite: %v", err)
	}
	req := encodeRequest(joinRequest{invite: expired, publicKey: [32]byte{1}})
	if _, err := runSetupCLI(t, "invite", "accept", req, "--ca", m.caDir()); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("accept of an expired invite: %v", err)
	}
}

func TestTokensSayWhatIsWrong(t *testing.T) {
	m := newMachine(t)
	mustRunSetupCLI(t, append(m.flags(), "init", "--network", "home", "--ca", "--name", "alpha")...)
	inv := tokenAfter(t, mustRunSetupCLI(t, "invite", "--ca", m.caDir(), "--name", "beta"), "burrow join ")
	req := tokenAfter(t, mustRunSetupCLI(t, append(newMachine(t).flags(), "join", inv)...), "burrow invite accept ")
	flipped := byte('A')
	if inv[40] == 'A' {
		flipped = 'B'
	}
	damaged := inv[:40] + string(flipped) + inv[41:]
	wrapped := inv[:50] + "\n  " + inv[50:]
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"damaged", []string{"join", damaged}, "checksum"},
		{"cut", []string{"join", inv[:len(inv)/2]}, "copy it again"},
		{"not base64", []string{"join", "hello, world"}, "not a burrow token"},
		{"request given to join", []string{"join", req}, "invite accept"},
		{"invite given to accept", []string{"invite", "accept", inv, "--ca", m.caDir()}, "burrow join"},
		{"no CA", []string{"invite", "accept", req, "--ca", t.TempDir()}, "no CA in"},
		{"cert before invite", []string{"join", "--cert", "x", "--dir", t.TempDir()}, "burrow join INVITE"},
	}
	for _, tc := range cases {
		if _, err := runSetupCLI(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error mentioning %q", tc.name, err, tc.want)
		}
	}
	// A token wrapped by a terminal still works.
	if _, err := decodeInvite(wrapped); err != nil {
		t.Errorf("wrapped invite: %v", err)
	}
}

// FuzzReadInviteBody: the body of an invite or join request (what a token
// carries once its checksum passed) never panics the reader, and what
// reads back encodes to the same bytes.
func FuzzReadInviteBody(f *testing.F) {
	ca, err := identity.NewCA("fuzz", bytes.NewReader(bytes.Repeat([]byte{7}, 64)))
	if err != nil {
		f.Fatal(err)
	}
	first := contacts{bootstrap: []netip.AddrPort{netip.MustParseAddrPort("192.0.2.1:7400")},
		beacons: []config.BeaconRef{{Addr: netip.MustParseAddrPort("198.51.100.2:7400"), WebSocket: "wss://beacon.example/burrow"}}}
	inv, err := newInvite(ca, "laptop", []netip.Prefix{netip.MustParsePrefix("10.0.0.7/24")}, first, time.Unix(1e9, 0), time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(inv.appendBody(nil))
	f.Add(append(inv.appendBody(nil), make([]byte, 32)...))
	f.Fuzz(func(t *testing.T, body []byte) {
		r := &tokenReader{buf: body}
		got, err := readInviteBody(r)
		if err != nil || r.finish() != nil {
			return
		}
		if again := got.appendBody(nil); !bytes.Equal(again, body) {
			t.Fatalf("read %x, encodes back as %x", body, again)
		}
	})
}
