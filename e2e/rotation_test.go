package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"burrow/identity"
	"burrow/netlab"
	"burrow/netlab/cluster"
	"burrow/node"
)

// TestCARotation moves a network to a new CA the way the README says, with
// burrow's own commands: `burrow ca init` makes the new CA, members trust a
// file holding both CAs, and a member's certificate is signed again by the
// new CA (`burrow cert sign --force`). Mid-way, the moved member links with
// a member that trusts both and pings over the link; a member that trusts
// only the old CA refuses it, naming the CA it does not trust.
func TestCARotation(t *testing.T) {
	_, nw := newNetwork(t, 3)
	moved, both, old := nw.Nodes[0], nw.Nodes[1], nw.Nodes[2]
	newCA := filepath.Join(nw.Dir, "ca-next")
	run := func(args ...string) string {
		out, err := exec.Command(burrowBin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("burrow %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("ca", "init", "--network", "e2e", "--dir", newCA)
	oldCert, err := os.ReadFile(filepath.Join(nw.Dir, "ca", identity.CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	nextCert, err := os.ReadFile(filepath.Join(newCA, identity.CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(nw.Dir, "ca-both.crt")
	if err := os.WriteFile(bundle, append(oldCert, nextCert...), 0o644); err != nil {
		t.Fatal(err)
	}
	moved.Config.CA, both.Config.CA = bundle, bundle
	run("cert", "sign", "--ca", newCA, "--name", moved.Name, "--state", moved.Dir, "--address", moved.Address.String(),
		"--out", moved.Config.Cert, "--force")
	moved.Dial(both)
	moved.Dial(old)
	both.Dial(old)
	startAll(t, nw)

	ctx := ctxFor(t, 30*time.Second)
	linked := func(a, b *cluster.Node) bool {
		st, err := a.Status()
		return err == nil && slices.ContainsFunc(st.Links, func(l node.LinkStatus) bool { return l.NodeID == b.ID.String() && l.State == "up" })
	}
	if err := cluster.WaitFor(ctx, "links between the moved member and the one trusting both, and between the two old certificates", func() bool {
		return linked(moved, both) && linked(both, old)
	}); err != nil {
		t.Fatal(err)
	}
	if r, err := netlab.Ping(ctx, moved.Host, both.Address.Addr(), 3, 100*time.Millisecond); err != nil || r.Received == 0 {
		t.Fatalf("ping from the moved member: %+v %v", r, err)
	}
	next, err := identity.LoadCA(newCA)
	if err != nil {
		t.Fatal(err)
	}
	// The member that trusts only the old CA checks the moved member's
	// certificate last in the handshake and refuses it.
	if err := cluster.WaitFor(ctx, "the member trusting only the old CA to refuse the new certificate", func() bool {
		st, err := old.Status()
		return err == nil && st.Handshakes.Rejected > 0
	}); err != nil {
		t.Fatal(err)
	}
	// burrow cert show says why, naming both CAs.
	out, err := exec.Command(burrowBin, "cert", "show", moved.Config.Cert, "--ca-cert", old.Config.CA).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "issued by CA "+next.Fingerprint()) || !strings.Contains(string(out), "trusts "+nw.CA.Fingerprint()) {
		t.Errorf("burrow cert show against the old CA: %v, want a refusal naming both CAs:\n%s", err, out)
	}
	if linked(old, moved) {
		t.Fatal("a member trusting only the old CA linked with a certificate of the new one")
	}
	st, err := moved.Status()
	if err != nil {
		t.Fatal(err)
	}
	if st.Certificate.Issuer != next.Fingerprint() {
		t.Errorf("status shows the certificate signed by CA %s, want the new CA %s", st.Certificate.Issuer, next.Fingerprint())
	}
}
