package main

import (
	"encoding/base64"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"burrow/identity"
)

// certFixture is a CA and a node key in a temporary directory.
type certFixture struct {
	dir, caDir, state string
	key               identity.NodeKey
}

func newCertFixture(t *testing.T) certFixture {
	t.Helper()
	dir := t.TempDir()
	f := certFixture{dir: dir, caDir: filepath.Join(dir, "ca"), state: filepath.Join(dir, "state")}
	mustRunIdentityCLI(t, "ca", "init", "--network", "home", "--dir", f.caDir)
	mustRunIdentityCLI(t, "key", "generate", "--state", f.state)
	key, err := identity.LoadNodeKey(filepath.Join(f.state, identity.NodeKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	f.key = key
	return f
}

func (f certFixture) caCert() string { return filepath.Join(f.caDir, identity.CACertFile) }

func TestCertSignAndShow(t *testing.T) {
	f := newCertFixture(t)
	out := filepath.Join(f.dir, "laptop.crt")
	before := time.Now()
	printed := mustRunIdentityCLI(t, "cert", "sign", "--ca", f.caDir, "--name", "laptop", "--state", f.state,
		"--address", "10.0.0.1/24", "--address", "fd00::1/64", "--group", "admins", "--group", "ops", "--out", out)
	if !strings.Contains(printed, f.key.ID().String()) || !strings.Contains(printed, out) {
		t.Errorf("cert sign output lacks the node ID or the file:\n%s", printed)
	}
	cert, err := identity.LoadCertificate(out)
	if err != nil {
		t.Fatal(err)
	}
	wantAddrs := []netip.Prefix{netip.MustParsePrefix("10.0.0.1/24"), netip.MustParsePrefix("fd00::1/64")}
	if cert.Name != "laptop" || cert.Network != "home" || cert.PublicKey != f.key.Public ||
		!slices.Equal(cert.Addresses, wantAddrs) || !slices.Equal(cert.Groups, []string{"admins", "ops"}) {
		t.Fatalf("signed certificate %+v does not hold the requested fields", cert)
	}
	wantNotAfter := before.Add(365 * 24 * time.Hour)
	if d := cert.NotAfter.Sub(wantNotAfter); d < -2*time.Second || d > time.Minute {
		t.Errorf("default validity ends %s, want about %s", cert.NotAfter, wantNotAfter)
	}
	if info, err := os.Stat(out); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("certificate file mode: %v, %v; want 0600", info.Mode(), err)
	}

	text := mustRunIdentityCLI(t, "cert", "show", out, "--ca-cert", f.caCert())
	for _, want := range []string{"name:        laptop", "node id:     " + f.key.ID().String(),
		"addresses:   10.0.0.1/24, fd00::1/64", "groups:      admins, ops", "router:      no", "verified:    yes"} {
		if !strings.Contains(text, want) {
			t.Errorf("cert show lacks %q:\n%s", want, text)
		}
	}

	var view certView
	if err := json.Unmarshal([]byte(mustRunIdentityCLI(t, "cert", "show", out, "--ca-cert", f.caCert(), "--json")), &view); err != nil {
		t.Fatalf("cert show --json is not JSON: %v", err)
	}
	if view.NodeID != f.key.ID().String() || view.Verified == nil || !*view.Verified || !view.NotAfter.Equal(cert.NotAfter) {
		t.Errorf("cert show --json: %+v", view)
	}
	var unchecked certView
	if err := json.Unmarshal([]byte(mustRunIdentityCLI(t, "cert", "show", out, "--json")), &unchecked); err != nil || unchecked.Verified != nil {
		t.Errorf("cert show --json without a CA claims a verification result: %+v, %v", unchecked, err)
	}
}

// TestCertSignRouter: --router puts group router in the certificate, once
// even when --group names it too, and cert show says so.
func TestCertSignRouter(t *testing.T) {
	f := newCertFixture(t)
	out := filepath.Join(f.dir, "gw.crt")
	mustRunIdentityCLI(t, "cert", "sign", "--ca", f.caDir, "--name", "gw", "--state", f.state,
		"--group", "ops", "--group", "router", "--router", "--out", out)
	cert, err := identity.LoadCertificate(out)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cert.Groups, []string{"ops", "router"}) {
		t.Fatalf("groups %v, want ops and router once", cert.Groups)
	}
	if text := mustRunIdentityCLI(t, "cert", "show", out); !strings.Contains(text, "router:      yes") {
		t.Errorf("cert show does not say the node is a router:\n%s", text)
	}
	var view certView
	if err := json.Unmarshal([]byte(mustRunIdentityCLI(t, "cert", "show", out, "--json")), &view); err != nil || !view.Router {
		t.Errorf("cert show --json: %+v, %v; want router true", view, err)
	}
}

func TestCertSignWithPublicKeyAndValidity(t *testing.T) {
	f := newCertFixture(t)
	out := filepath.Join(f.dir, "remote.crt")
	before := time.Now()
	mustRunIdentityCLI(t, "cert", "sign", "--ca", f.caDir, "--name", "remote",
		"--public-key", base64.StdEncoding.EncodeToString(f.key.Public[:]), "--valid", "1h", "--out", out)
	cert, err := identity.LoadCertificate(out)
	if err != nil {
		t.Fatal(err)
	}
	if cert.PublicKey != f.key.Public || len(cert.Addresses) != 0 || len(cert.Groups) != 0 {
		t.Fatalf("certificate %+v", cert)
	}
	if d := cert.NotAfter.Sub(before.Add(time.Hour)); d < -2*time.Second || d > time.Minute {
		t.Errorf("--valid 1h gave NotAfter %s, signed at %s", cert.NotAfter, before)
	}
	if cert.NotBefore.After(before) {
		t.Errorf("NotBefore %s is after the signing time %s", cert.NotBefore, before)
	}
}

func TestCertSignRefusesOverwriteWithoutForce(t *testing.T) {
	f := newCertFixture(t)
	out := filepath.Join(f.dir, "node.crt")
	sign := func(name string, extra ...string) error {
		_, err := runIdentityCLI(t, append([]string{"cert", "sign", "--ca", f.caDir, "--name", name, "--state", f.state, "--out", out}, extra...)...)
		return err
	}
	if err := sign("first"); err != nil {
		t.Fatal(err)
	}
	if err := sign("second"); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("overwriting without --force: %v, want a refusal naming --force", err)
	}
	if err := sign("third", "--force"); err != nil {
		t.Fatalf("overwriting with --force: %v", err)
	}
	// --force must not leak into the next run.
	if err := sign("fourth"); err == nil {
		t.Fatal("a run without --force overwrote the file after a run with it")
	}
	if cert, err := identity.LoadCertificate(out); err != nil || cert.Name != "third" {
		t.Fatalf("certificate file holds %+v, %v; want the one named third", cert, err)
	}
}

func TestCertSignErrors(t *testing.T) {
	f := newCertFixture(t)
	out := filepath.Join(f.dir, "x.crt")
	pub := base64.StdEncoding.EncodeToString(f.key.Public[:])
	tooMany := []string{}
	for i := range identity.MaxAddresses + 1 {
		tooMany = append(tooMany, "--address", netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}).String()+"/24")
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no CA", []string{"--name", "a", "--state", f.state, "--out", out}, "--ca is required"},
		{"no name", []string{"--ca", f.caDir, "--state", f.state, "--out", out}, "--name is required"},
		{"no out", []string{"--ca", f.caDir, "--name", "a", "--state", f.state}, "--out is required"},
		{"no key", []string{"--ca", f.caDir, "--name", "a", "--out", out}, "--public-key KEY"},
		{"both keys", []string{"--ca", f.caDir, "--name", "a", "--state", f.state, "--public-key", pub, "--out", out}, "not both"},
		{"bad key", []string{"--ca", f.caDir, "--name", "a", "--public-key", pub[:20], "--out", out}, "not a base64 X25519 public key"},
		{"missing state", []string{"--ca", f.caDir, "--name", "a", "--state", filepath.Join(f.dir, "none"), "--out", out}, "burrow key generate"},
		{"bad name", []string{"--ca", f.caDir, "--name", "a/b", "--state", f.state, "--out", out}, "--name"},
		{"bad group", []string{"--ca", f.caDir, "--name", "a", "--state", f.state, "--group", "has space", "--out", out}, "--group"},
		{"bad address", []string{"--ca", f.caDir, "--name", "a", "--state", f.state, "--address", "10.0.0.1", "--out", out}, "--address"},
		{"too many addresses", append([]string{"--ca", f.caDir, "--name", "a", "--state", f.state, "--out", out}, tooMany...), "at most 8"},
		{"bad validity", []string{"--ca", f.caDir, "--name", "a", "--state", f.state, "--valid", "0s", "--out", out}, "--valid must be positive"},
		{"missing CA", []string{"--ca", filepath.Join(f.dir, "none"), "--name", "a", "--state", f.state, "--out", out}, "burrow ca init"},
	}
	for _, tc := range cases {
		_, err := runIdentityCLI(t, append([]string{"cert", "sign"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want a one-line error containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a failed cert sign wrote the certificate")
	}
}

func TestCertShowVerificationFailures(t *testing.T) {
	f := newCertFixture(t)
	out := filepath.Join(f.dir, "node.crt")
	mustRunIdentityCLI(t, "cert", "sign", "--ca", f.caDir, "--name", "node", "--state", f.state, "--out", out)
	otherCA := filepath.Join(f.dir, "other")
	mustRunIdentityCLI(t, "ca", "init", "--network", "home", "--dir", otherCA)

	printed, err := runIdentityCLI(t, "cert", "show", out, "--ca-cert", filepath.Join(otherCA, identity.CACertFile))
	if err == nil || !strings.Contains(err.Error(), "another network's CA") {
		t.Errorf("cert show against another CA: %v", err)
	}
	if !strings.Contains(printed, "verified:    NO") {
		t.Errorf("cert show against another CA printed:\n%s", printed)
	}

	ca, err := identity.LoadCA(f.caDir)
	if err != nil {
		t.Fatal(err)
	}
	expired, err := identity.SignCertificate(ca, identity.Certificate{
		Name:      "old",
		PublicKey: f.key.Public,
		NotBefore: time.Now().Add(-48 * time.Hour),
		NotAfter:  time.Now().Add(-24 * time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}
	expiredPath := filepath.Join(f.dir, "old.crt")
	if err := identity.SaveCertificate(expiredPath, expired); err != nil {
		t.Fatal(err)
	}
	printed, err = runIdentityCLI(t, "cert", "show", expiredPath, "--ca-cert", f.caCert(), "--json")
	if err == nil || !strings.Contains(err.Error(), "expired") || !strings.Contains(err.Error(), "burrow cert sign") {
		t.Errorf("cert show of an expired certificate: %v", err)
	}
	var view certView
	if jsonErr := json.Unmarshal([]byte(printed), &view); jsonErr != nil || view.Verified == nil || *view.Verified || view.VerifyError == "" {
		t.Errorf("cert show --json of an expired certificate: %+v, %v", view, jsonErr)
	}
}

func TestCertShowErrors(t *testing.T) {
	f := newCertFixture(t)
	garbage := filepath.Join(f.dir, "garbage.crt")
	if err := os.WriteFile(garbage, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"cert", "show"}, "exactly one certificate file"},
		{[]string{"cert", "show", "a.crt", "b.crt"}, "exactly one certificate file"},
		{[]string{"cert", "show", filepath.Join(f.dir, "missing.crt")}, "missing.crt"},
		{[]string{"cert", "show", garbage}, "malformed"},
		{[]string{"cert", "show", garbage, "--ca-cert", filepath.Join(f.dir, "none")}, "malformed"},
	}
	for _, tc := range cases {
		_, err := runIdentityCLI(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("burrow %s: %v, want a one-line error containing %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}
