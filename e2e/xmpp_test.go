package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	crand "crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"burrow/config"
	"burrow/netlab"
	"burrow/netlab/cluster"
	"burrow/netlab/labtest"
)

// xmppDomain is the test server's XMPP domain; its publish-subscribe
// service is pubsub.xmppDomain.
const xmppDomain = "xmpp.burrow.test"

// prosody is Debian's prosody serving one lab host, with its own
// configuration, data, certificate and accounts in dir.
type prosody struct {
	host *netlab.Host
	dir  string
	cfg  string
	ca   string // the server's self-signed certificate, which members trust
	proc *netlab.Process
}

// newProsody writes the server's certificate and configuration; admin is
// the server admin's account, the only one prosody lets create
// publish-subscribe nodes.
func newProsody(t *testing.T, lab *netlab.Lab, host *netlab.Host) *prosody {
	t.Helper()
	p := &prosody{host: host, dir: filepath.Join(lab.LogDir(), "prosody")}
	if err := os.MkdirAll(filepath.Join(p.dir, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	p.ca = filepath.Join(p.dir, "server.crt")
	keyPath := filepath.Join(p.dir, "server.key")
	writeSelfSigned(t, p.ca, keyPath, xmppDomain, "pubsub."+xmppDomain)
	p.cfg = filepath.Join(p.dir, "prosody.cfg.lua")
	conf := fmt.Sprintf(`-- Written by burrow's end-to-end test.
run_as_root = true
pidfile = %[1]q
data_path = %[2]q
certificates = %[3]q
log = { { levels = { min = "info" }, to = "console" } }
interfaces = { %[4]q }
c2s_ports = { 5222 }
c2s_direct_tls_ports = { }
s2s_ports = { }
http_ports = { }
https_ports = { }
modules_enabled = { "roster"; "saslauth"; "tls"; "disco"; "ping"; "posix" }
modules_disabled = { "s2s" }
authentication = "internal_hashed"
c2s_require_encryption = true
allow_registration = false
admins = { "admin@%[5]s" }
ssl = { certificate = %[6]q; key = %[7]q }
VirtualHost %[5]q
Component "pubsub.%[5]s" "pubsub"
`, filepath.Join(p.dir, "prosody.pid"), filepath.Join(p.dir, "data"), p.dir, host.Addr.String(), xmppDomain, p.ca, keyPath)
	if err := os.WriteFile(p.cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// register creates an account with prosody's own tool and returns the
// file holding its password.
func (p *prosody) register(t *testing.T, user string) string {
	t.Helper()
	password := fmt.Sprintf("%s-%d", user, time.Now().UnixNano())
	out, err := exec.Command("prosodyctl", "--config", p.cfg, "register", user, xmppDomain, password).CombinedOutput()
	if err != nil {
		t.Fatalf("prosodyctl register %s: %v\n%s", user, err, out)
	}
	path := filepath.Join(p.dir, user+".pass")
	if err := os.WriteFile(path, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// start runs prosody in the foreground in its host's namespace.
func (p *prosody) start(t *testing.T) {
	t.Helper()
	var err error
	if p.proc, err = p.host.Start("prosody", "--config", p.cfg, "-F"); err != nil {
		t.Fatal(err)
	}
	if err := p.host.WaitListening(ctxFor(t, 15*time.Second), "tcp", 5222); err != nil {
		t.Fatalf("prosody does not listen: %v (log %s)", err, p.proc.LogPath())
	}
}

// stop ends prosody by its PID.
func (p *prosody) stop(t *testing.T) {
	t.Helper()
	if err := p.proc.Stop(); err != nil {
		t.Fatal(err)
	}
}

// rendezvous is a member's rendezvous section for this server.
func (p *prosody) rendezvous(user, passwordFile string) *config.XMPP {
	return &config.XMPP{Server: p.host.Addr.String() + ":5222", JID: user + "@" + xmppDomain, PasswordFile: passwordFile,
		CA: p.ca, PubSub: "pubsub." + xmppDomain}
}

// writeSelfSigned writes a self-signed certificate for names, and its key.
func writeSelfSigned(t *testing.T, certPath, keyPath string, names ...string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(crand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestXMPPRendezvousWithoutABeacon: Debian's prosody on the public side is
// the only meeting point of eight members, two on the internet, three
// behind endpoint-independent NATs and three behind symmetric NATs, each
// NAT a router of its own; there is no
// beacon and no bootstrap address. They find each other through the
// server's bounded list of cards and learn their public addresses from the
// public members; every pair pings. Stopping prosody changes nothing that
// is up, and the members reconnect when it is back. A node with a valid
// account on the server but a certificate of another CA gets no link.
func TestXMPPRendezvousWithoutABeacon(t *testing.T) {
	if _, err := exec.LookPath("prosody"); err != nil {
		t.Skip("skipping: Debian's prosody is not installed (scripts/install-deps)")
	}
	lab := labtest.New(t)
	nw, err := cluster.New(lab, "xmpp", burrowBin)
	if err != nil {
		t.Fatal(err)
	}
	xh, err := lab.AddHost("xmpp")
	if err != nil {
		t.Fatal(err)
	}
	server := newProsody(t, lab, xh)
	adminPass := server.register(t, "admin")
	server.start(t)

	type member struct {
		name string
		nat  netlab.NAT
	}
	members := []member{
		{"pub1", netlab.NoNAT}, {"pub2", netlab.NoNAT},
		{"eim1", netlab.EndpointIndependent}, {"eim2", netlab.EndpointIndependent}, {"eim3", netlab.EndpointIndependent},
		{"sym1", netlab.Symmetric}, {"sym2", netlab.Symmetric}, {"sym3", netlab.Symmetric},
	}
	addNode := func(nw *cluster.Network, m member, i int) *cluster.Node {
		node := addMember(t, lab, nw, m.name, m.nat, i)
		node.Config.Links.Keepalive = 500 * time.Millisecond
		node.Config.Links.DeadAfter = 3 * time.Second
		node.Config.Overlay.Successors = len(members) - 1 // a full mesh: every pair gets a link
		node.Config.Overlay.Stabilize = time.Second
		node.Config.Rendezvous.XMPP = server.rendezvous(m.name, server.register(t, m.name))
		return node
	}
	for i, m := range members {
		addNode(nw, m, i)
	}

	// The admin creates the network's list of cards once, with a member's
	// configuration for the names.
	cfgPath := filepath.Join(server.dir, "member.yaml")
	data, err := yaml.Marshal(&nw.Nodes[0].Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	createNode := func(passwordFile string) (string, error) {
		out, err := xh.Run(ctxFor(t, 30*time.Second), burrowBin, "xmpp", "create-node", "-c", cfgPath, "--jid", "admin@"+xmppDomain, "--password-file", passwordFile)
		return string(out), err
	}
	wrong := filepath.Join(server.dir, "wrong.pass")
	if err := os.WriteFile(wrong, []byte("not the password\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := createNode(wrong); err == nil || !strings.Contains(out, "check rendezvous.xmpp.jid and its password") {
		t.Errorf("a wrong password: %v, %s; want an error pointing at the JID and password", err, out)
	}
	if out, err := createNode(adminPass); err != nil || !strings.Contains(out, "created node burrow-xmpp") {
		t.Fatalf("burrow xmpp create-node: %v\n%s", err, out)
	}
	if out, err := createNode(adminPass); err != nil || !strings.Contains(out, "exists already") {
		t.Errorf("burrow xmpp create-node again: %v\n%s", err, out)
	}

	start := time.Now()
	startAll(t, nw)
	if err := cluster.WaitFor(ctxFor(t, 90*time.Second), "a consistent ring", func() bool { return cluster.RingConsistent(nw.Nodes) }); err != nil {
		t.Fatal(err)
	}
	t.Logf("ring of %d consistent %v after start, with no beacon", len(nw.Nodes), time.Since(start).Round(100*time.Millisecond))
	pingAll(t, nw.Nodes, 90*time.Second)
	if t.Failed() {
		t.FailNow()
	}
	upBefore := map[*cluster.Node]int{}
	var offers uint64
	for _, n := range nw.Nodes {
		st, err := n.Status()
		if err != nil {
			t.Fatal(err)
		}
		if st.XMPP == nil || !st.XMPP.Connected || st.Rendezvous == nil {
			t.Fatalf("%s: rendezvous not shown connected in status: %+v %+v", n.Name, st.XMPP, st.Rendezvous)
		}
		t.Logf("%s: nat %s, reflexive %v; %d cards listed, %d fetches, %d offers sent, %d received",
			n.Name, st.Reach.NAT, st.Reach.Reflexive, st.Rendezvous.Listed, st.Rendezvous.Fetches, st.Rendezvous.OffersSent, st.Rendezvous.OffersGot)
		offers += st.Rendezvous.OffersSent
		if st.Reach.Beacon != "" || len(n.Config.Beacons) > 0 || len(n.Config.Overlay.Bootstrap) > 0 {
			t.Fatalf("%s has a beacon or a bootstrap address", n.Name)
		}
		if xmppKind(n) != "public" && len(st.Reach.Reflexive) == 0 {
			t.Errorf("%s behind a NAT learned no public address from the public members", n.Name)
		}
	}
	// A join costs a few cards, not one per member.
	if max := uint64(len(nw.Nodes) * maxOffersPerJoin); offers > max {
		t.Errorf("%d offers for %d joins; at most %d expected", offers, len(nw.Nodes), max)
	}
	// Hole punching between endpoint-independent NATs, public members
	// relaying for the symmetric ones: as with a beacon.
	for x, a := range nw.Nodes {
		for _, b := range nw.Nodes[x+1:] {
			want := expectedPath(xmppKind(a), xmppKind(b))
			err := cluster.WaitFor(ctxFor(t, 60*time.Second), fmt.Sprintf("%s-%s on a %s path", a.Name, b.Name, want), func() bool {
				return a.PathTo(b) == want && b.PathTo(a) == want
			})
			if err != nil {
				t.Errorf("%v (now %q/%q)", err, a.PathTo(b), b.PathTo(a))
			}
		}
	}
	for _, n := range nw.Nodes {
		t.Logf("%s: paths %s", n.Name, pathsOf(n, nw.Nodes))
		upBefore[n] = n.UpLinks()
	}

	// The server goes away: nothing that is up changes.
	server.stop(t)
	if err := cluster.WaitFor(ctxFor(t, 30*time.Second), "every member to see the server gone", func() bool {
		for _, n := range nw.Nodes {
			if st, err := n.Status(); err != nil || st.XMPP.Connected {
				return false
			}
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * nw.Nodes[0].Config.Links.DeadAfter)
	for _, n := range nw.Nodes {
		if up := n.UpLinks(); up < upBefore[n] {
			t.Errorf("%s: %d links up without the server, %d before", n.Name, up, upBefore[n])
		}
		if log, _ := os.ReadFile(n.Process.LogPath()); !strings.Contains(string(log), "XMPP rendezvous: cannot connect") {
			t.Errorf("%s does not log its reconnection attempts", n.Name)
		}
	}
	pingAll(t, nw.Nodes, 30*time.Second)
	n := nw.Nodes[2]
	out, err := n.Host.Run(ctxFor(t, 10*time.Second), burrowBin, "status", "--socket", n.Config.ControlSocket)
	if err != nil || !strings.Contains(string(out), "xmpp      eim1@"+xmppDomain) || !strings.Contains(string(out), "not connected (links that are up stay up)") {
		t.Errorf("burrow status does not show the server away: %v\n%s", err, out)
	}

	// Back: the members reconnect by themselves.
	server.start(t)
	if err := cluster.WaitFor(ctxFor(t, 90*time.Second), "every member to reconnect", func() bool {
		for _, n := range nw.Nodes {
			if st, err := n.Status(); err != nil || !st.XMPP.Connected {
				return false
			}
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}

	// A valid account on the server, a certificate of another CA.
	other, err := cluster.New(lab, "xmpp", burrowBin)
	if err != nil {
		t.Fatal(err)
	}
	answeredBefore := answeredIntruder(nw.Nodes)
	intruder := addNode(other, member{"intruder", netlab.EndpointIndependent}, 9)
	if err := intruder.Start(); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitFor(ctxFor(t, 60*time.Second), "the intruder's offers to be answered", func() bool {
		st, err := intruder.Status()
		return err == nil && st.Rendezvous != nil && st.Rendezvous.OffersSent > 0 && st.Rendezvous.Listed > 0 && answeredIntruder(nw.Nodes) > answeredBefore
	}); err != nil {
		st, _ := intruder.Status()
		t.Fatalf("%v; intruder: %+v", err, st)
	}
	time.Sleep(10 * time.Second) // the members' dials toward it run their course
	st, err := intruder.Status()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range st.Links {
		if l.State == "up" {
			t.Errorf("the intruder has a link up to %s", l.Peer)
		}
	}
	for _, n := range nw.Nodes {
		ms, err := n.Status()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ms.Links {
			if l.NodeID == intruder.ID.String() {
				t.Errorf("%s has a link to the intruder: %+v", n.Name, l)
			}
		}
	}
	if r, _ := netlab.Ping(ctxFor(t, 5*time.Second), intruder.Host, nw.Nodes[0].Address.Addr(), 2, 100*time.Millisecond); r.Received != 0 {
		t.Error("the intruder reached a member's virtual address")
	}
	t.Logf("intruder: %d cards listed, %d offers sent, %d answers to it", st.Rendezvous.Listed, st.Rendezvous.OffersSent, answeredIntruder(nw.Nodes)-answeredBefore)
}

// maxOffersPerJoin bounds the cards one join may send: a few contacts,
// each offered at most three times (node.maxOffers).
const maxOffersPerJoin = 3 * 3

// answeredIntruder counts the offers members answered; once the network
// has formed, only the intruder sends any.
func answeredIntruder(nodes []*cluster.Node) uint64 {
	var n uint64
	for _, node := range nodes {
		if st, err := node.Status(); err == nil && st.Rendezvous != nil {
			n += st.Rendezvous.Answered
		}
	}
	return n
}

// xmppKind is a member's NAT kind as natmatrix_test.go names them.
func xmppKind(n *cluster.Node) string {
	switch n.Name[:3] {
	case "pub":
		return "public"
	case "eim":
		return "endpoint-independent"
	}
	return "symmetric"
}

// pathsOf lists the path from n to each other node, for the log.
func pathsOf(n *cluster.Node, all []*cluster.Node) string {
	var out []string
	for _, o := range all {
		if o != n {
			out = append(out, o.Name+"="+n.PathTo(o))
		}
	}
	return strings.Join(out, " ")
}
