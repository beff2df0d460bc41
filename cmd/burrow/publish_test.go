package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"burrow/identity"
)

func runPublishCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := &cobra.Command{Use: "burrow", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(newCACmd(), newKeyCmd(), newCertCmd(), newPublishCmd())
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

// publishFixture is a CA that signed a board with a fixed address, a
// gateway and a member without any address.
func publishFixture(t *testing.T) certFixture {
	t.Helper()
	f := newCertFixture(t)
	for name, addr := range map[string]string{"board": "10.0.0.3/24", "gateway": "10.0.0.1/24", "leased": ""} {
		state := filepath.Join(f.dir, name)
		mustRunIdentityCLI(t, "key", "generate", "--state", state)
		args := []string{"cert", "sign", "--ca", f.caDir, "--name", name, "--state", state, "--out", filepath.Join(f.dir, name+".crt")}
		if addr != "" {
			args = append(args, "--address", addr)
		}
		mustRunIdentityCLI(t, args...)
	}
	return f
}

func TestPublishSignAndRevoke(t *testing.T) {
	f := publishFixture(t)
	out, err := runPublishCLI(t, "publish", "sign", "--ca", f.caDir, "--service", "board:8443", "--on", "gateway", "--listen", "203.0.113.7:443", "--valid", "24h")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	matches, _ := filepath.Glob(filepath.Join(f.caDir, publishedDir, "*"+publicationExt))
	if len(matches) != 1 {
		t.Fatalf("publications kept in the CA directory: %v", matches)
	}
	p, err := identity.LoadPublication(matches[0])
	if err != nil {
		t.Fatal(err)
	}
	board, _ := identity.LoadCertificate(filepath.Join(f.dir, "board.crt"))
	gateway, _ := identity.LoadCertificate(filepath.Join(f.dir, "gateway.crt"))
	if p.Member != board.ID() || p.Gateway != gateway.ID() || p.Service.String() != "10.0.0.3:8443" || p.Listen.String() != "203.0.113.7:443" ||
		p.NotAfter.Sub(p.IssuedAt) != 24*time.Hour || !strings.Contains(out, p.SerialString()) {
		t.Fatalf("signed %+v, printed %s", p, out)
	}
	trust, err := identity.LoadTrust(f.caCert())
	if err != nil {
		t.Fatal(err)
	}
	if err := trust.VerifyPublication(p, gateway.ID(), time.Now()); err != nil {
		t.Fatal(err)
	}
	out, err = runPublishCLI(t, "publish", "revoke", "--ca", f.caDir, p.SerialString())
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	r, err := identity.LoadPublicationRevocation(filepath.Join(f.caDir, publishedDir, p.SerialString()+publicationRevocationExt))
	if err != nil || r.Serial != p.Serial || r.Gateway != p.Gateway || trust.VerifyPublicationRevocation(r) != nil {
		t.Fatalf("revocation %+v, %v", r, err)
	}
}

// TestPublishSignErrorsNameTheFlag: each mistake is refused, naming the
// flag and what is wrong, and nothing is written.
func TestPublishSignErrorsNameTheFlag(t *testing.T) {
	f := publishFixture(t)
	other := filepath.Join(f.dir, "other-ca")
	mustRunIdentityCLI(t, "ca", "init", "--network", "home", "--dir", other)
	cases := []struct {
		args []string
		says string
	}{
		{[]string{"--service", "board:8443", "--on", "gateway", "--listen", "203.0.113.7:443"}, "--ca is required"},
		{[]string{"--ca", f.caDir, "--service", "board", "--on", "gateway", "--listen", "203.0.113.7:443"}, "--service \"board\": give the member and the TCP port"},
		{[]string{"--ca", f.caDir, "--service", "board:99999", "--on", "gateway", "--listen", "203.0.113.7:443"}, "is no TCP port"},
		{[]string{"--ca", f.caDir, "--service", "nobody:22", "--on", "gateway", "--listen", "203.0.113.7:443"}, "--service: \"nobody\" is no node the CA"},
		{[]string{"--ca", f.caDir, "--service", "board:22", "--listen", "203.0.113.7:443"}, "--on is required"},
		{[]string{"--ca", f.caDir, "--service", "board:22", "--on", "board", "--listen", "203.0.113.7:443"}, "names the member itself"},
		{[]string{"--ca", f.caDir, "--service", "leased:22", "--on", "gateway", "--listen", "203.0.113.7:443"}, "has no fixed address; give its address inside the network with --address"},
		{[]string{"--ca", f.caDir, "--service", "leased:22", "--address", "nowhere", "--on", "gateway", "--listen", "203.0.113.7:443"}, "--address \"nowhere\""},
		{[]string{"--ca", f.caDir, "--service", "board:22", "--on", "gateway", "--listen", "0.0.0.0:443"}, "--listen \"0.0.0.0:443\""},
		{[]string{"--ca", f.caDir, "--service", "board:22", "--on", "gateway", "--listen", "203.0.113.7"}, "--listen \"203.0.113.7\""},
		{[]string{"--ca", other, "--service", filepath.Join(f.dir, "board.crt") + ":22", "--on", filepath.Join(f.dir, "gateway.crt"), "--listen", "203.0.113.7:443"}, "was issued by CA"},
		{[]string{"--ca", f.caDir, "--service", "board:22", "--on", "gateway", "--listen", "203.0.113.7:443", "--valid", "0s"}, "valid for at least a second"},
	}
	for _, c := range cases {
		out, err := runPublishCLI(t, append([]string{"publish", "sign"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("publish sign %s: %v (%s), want an error saying %q", strings.Join(c.args, " "), err, out, c.says)
		}
	}
	if matches, _ := filepath.Glob(filepath.Join(f.caDir, publishedDir, "*")); len(matches) != 0 {
		t.Errorf("refused signings left files: %v", matches)
	}
	if _, err := runPublishCLI(t, "publish", "revoke", "--ca", f.caDir, "0123456789abcdef0123456789abcdef"); err == nil || !strings.Contains(err.Error(), "no serial of a publication") {
		t.Errorf("revoking an unknown serial: %v", err)
	}
}
