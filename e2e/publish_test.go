package e2e

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	crand "crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"burrow/config"
	"burrow/identity"
	"burrow/netlab"
	"burrow/netlab/cluster"
	"burrow/runtime/publish"
)

const (
	// serviceName is the name in the published service's own certificate.
	serviceName = "board.example.test"
	servicePort = 8443
	// publicPort is where the gateway exposes the service.
	publicPort = 443
	// cutWithin is how soon a revocation or a withdrawal must close the
	// listener and every connection it carries.
	cutWithin = 3 * time.Second
	// scanPeriod is how often a gateway looks for revocation files copied
	// into its state directory.
	scanPeriod = 2 * time.Second
)

// TestAPublishedHTTPSServiceIsReachedFromOutsideUntilRevoked: an HTTPS
// server (openssl s_server, with its own certificate from its own CA) runs
// on a member behind a symmetric NAT; the CA publishes it on a public
// member, the gateway. A host on the internet that is no member fetches it
// with curl through the gateway's address and verifies the service's own
// certificate end to end; a port nobody published gets nothing; removing
// the publication from the gateway's configuration (SIGHUP) and revoking it
// (burrow publish revoke --push) each close the listener and every open
// connection within cutWithin; the revoked publication is refused after,
// as are bad publications (see badPublications). The beacon, a member
// too, publishes the service as well, until a revocation file copied into
// its state directory closes it within a scan period and cutWithin.
func TestAPublishedHTTPSServiceIsReachedFromOutsideUntilRevoked(t *testing.T) {
	for _, tool := range []string{"openssl", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipping: %s is not installed (apt-get install openssl curl)", tool)
		}
	}
	n := newNATNetwork(t, map[string]netlab.NAT{"board": netlab.Symmetric})
	board := n.nodes["board"]
	gwHost, err := n.lab.AddHost("gateway")
	if err != nil {
		t.Fatal(err)
	}
	gw, err := n.net.AddNode(gwHost, "gateway", virtual(len(n.net.Nodes)))
	if err != nil {
		t.Fatal(err)
	}
	outside, err := n.lab.AddHost("outside") // on the internet, no member
	if err != nil {
		t.Fatal(err)
	}
	for _, node := range n.net.Nodes {
		node.Config.Links.Keepalive = 500 * time.Millisecond
		node.Config.Links.DeadAfter = 3 * time.Second
		node.Config.Overlay.Successors = len(n.net.Nodes) - 1
		node.Config.Overlay.Stabilize = time.Second
		if node != n.beacon {
			node.Config.Beacons = []config.BeaconRef{configBeacon(n.beacon)}
		}
	}
	startAll(t, n.net)
	pingAll(t, []*cluster.Node{gw, board}, 60*time.Second)
	t.Logf("gateway reaches board over a %s link", gw.PathTo(board))

	dir := t.TempDir()
	serviceCA := writeServiceCertificates(t, dir)
	server, err := board.Host.Start("openssl", "s_server", "-4", "-accept", fmt.Sprint(servicePort), "-www",
		"-cert", filepath.Join(dir, "service.crt"), "-key", filepath.Join(dir, "service.key"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Stop() })
	if err := board.Host.WaitListening(ctxFor(t, 10*time.Second), "tcp", servicePort); err != nil {
		t.Fatal(err)
	}

	public := netip.AddrPortFrom(gwHost.Addr, publicPort)
	// fetch gets the service from outside through via's port, trusting
	// only caFile.
	fetch := func(via netip.AddrPort, caFile string) (string, error) {
		out, err := outside.Run(ctxFor(t, 15*time.Second), "curl", "-sS", "--max-time", "10", "--cacert", caFile,
			"--resolve", fmt.Sprintf("%s:%d:%s", serviceName, via.Port(), via.Addr()), fmt.Sprintf("https://%s:%d/", serviceName, via.Port()))
		return string(out), err
	}
	curlWith := func(caFile string) (string, error) { return fetch(public, caFile) }
	curl := func() (string, error) { return curlWith(serviceCA) }
	refusedAt := func(via netip.AddrPort) error {
		out, err := fetch(via, serviceCA)
		if err == nil {
			return fmt.Errorf("%s answered: %.200s", via, out)
		}
		if !strings.Contains(out, "Connection refused") && !strings.Contains(out, "Couldn't connect") {
			return fmt.Errorf("%s: curl failed, but not with a refused connection: %s", via, out)
		}
		return nil
	}
	refused := func(port uint16) error { return refusedAt(netip.AddrPortFrom(gwHost.Addr, port)) }
	if err := refused(publicPort); err != nil {
		t.Fatalf("before any publication: %v", err)
	}

	caDir := filepath.Join(n.net.Dir, "ca")
	pubFile := filepath.Join(dir, "board-https.pub")
	burrow(t, "publish", "sign", "--ca", caDir, "--service", fmt.Sprintf("%s:%d", board.Config.Cert, servicePort),
		"--on", gw.Config.Cert, "--listen", public.String(), "--out", pubFile)

	// Listed in the configuration, put in force by SIGHUP.
	gw.Config.Publish = []string{pubFile}
	if err := gw.Reload(); err != nil {
		t.Fatal(err)
	}
	waitPublished(t, gw, 1)
	body, err := curl()
	if err != nil {
		t.Fatalf("fetching the published service from outside: %v", err)
	}
	if !strings.Contains(body, "s_server") {
		t.Fatalf("the page is not the board's s_server status page: %.300s", body)
	}
	// The certificate curl checked is the service's own: trusting
	// burrow's CA instead, curl refuses it.
	if out, err := curlWith(filepath.Join(n.net.Dir, "ca", identity.CACertFile)); err == nil || !strings.Contains(out, "certificate") {
		t.Errorf("curl trusting burrow's CA and not the service's: %v: %.300s", err, out)
	}
	t.Logf("outside fetched %d bytes of https://%s through %s, certificate verified against the service's own CA", len(body), serviceName, public)
	if err := refused(publicPort + 1); err != nil {
		t.Errorf("an unpublished port of the gateway: %v", err)
	}
	st := publication(t, gw)
	if st.Accepted < 1 || st.BytesIn == 0 || st.BytesOut < int64(len(body)) || st.Member != "board" || st.Listen != public.String() {
		t.Errorf("status after one fetch: %+v", st)
	}

	// Withdrawn from the configuration: the listener and an open
	// connection close.
	conn := openTLS(t, outside, public, serviceCA)
	gw.Config.Publish = nil
	start := time.Now()
	if err := gw.Reload(); err != nil {
		t.Fatal(err)
	}
	cut := waitCut(t, conn, start)
	if err := waitRefused(t, refused, start); err != nil {
		t.Fatalf("after the withdrawal: %v", err)
	}
	t.Logf("withdrawn by SIGHUP: open connection cut %v, port refusing %v after the signal", cut.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	waitPublished(t, gw, 0)

	// Handed over the control socket, then revoked by the CA.
	burrow(t, "publish", "add", pubFile, "--socket", gw.Config.ControlSocket)
	if _, err := curl(); err != nil {
		t.Fatalf("after burrow publish add: %v", err)
	}
	conn = openTLS(t, outside, public, serviceCA)
	// Byte for byte: the certificate the client got is the very one the
	// board's server holds, not one the gateway made.
	served, err := os.ReadFile(filepath.Join(dir, "service.crt"))
	if err != nil {
		t.Fatal(err)
	}
	if block, _ := pem.Decode(served); block == nil || !bytes.Equal(conn.ConnectionState().PeerCertificates[0].Raw, block.Bytes) {
		t.Error("the client did not get the service's own certificate through the gateway")
	}
	if err := cluster.WaitFor(ctxFor(t, 5*time.Second), "the open connection in status", func() bool { return publication(t, gw).Open == 1 }); err != nil {
		t.Error(err)
	}
	status := burrow(t, "status", "--socket", gw.Config.ControlSocket)
	line := lineWith(status, fmt.Sprintf("publish   %s -> board's %s:%d", public, board.Address.Addr(), servicePort))
	if !strings.Contains(line, "control socket") || !strings.Contains(line, ": 1 open,") {
		t.Errorf("burrow status does not list the publication from the control socket with 1 open connection:\n%s", status)
	}
	t.Logf("burrow status on the gateway: %s", line)
	start = time.Now()
	out := burrow(t, "publish", "revoke", "--ca", caDir, pubFile, "--push", "--socket", gw.Config.ControlSocket)
	cut = waitCut(t, conn, start)
	if err := waitRefused(t, refused, start); err != nil {
		t.Fatalf("after the revocation: %v", err)
	}
	if !strings.Contains(out, "open connections cut: 1 ") {
		t.Errorf("burrow publish revoke --push does not report the one open connection it cut: %s", out)
	}
	t.Logf("revoked: %s open connection cut %v, port refusing %v after burrow publish revoke started",
		strings.TrimSpace(out), cut.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	waitPublished(t, gw, 0)

	// Refused from now on, and so are publications for another gateway
	// and of another CA, each saying why.
	if out, err := burrowErr("publish", "add", pubFile, "--socket", gw.Config.ControlSocket); err == nil || !strings.Contains(out, "was revoked") {
		t.Errorf("adding the revoked publication again: %v: %s", err, out)
	}
	gw.Config.Publish = []string{pubFile}
	if err := gw.Reload(); err != nil {
		t.Fatal(err)
	}
	if err := refused(publicPort); err != nil {
		t.Errorf("the revoked publication listed in the configuration again: %v", err)
	}
	if out, err := burrowErr("publish", "add", pubFile, "--socket", board.Config.ControlSocket); err == nil || !strings.Contains(out, "to be exposed by gateway") {
		t.Errorf("a publication handed to the member instead of its gateway: %v: %s", err, out)
	}
	badPublications(t, n.net, gw, board, dir)
	if err := refused(publicPort); err != nil {
		t.Errorf("after the bad publications: %v", err)
	}

	// A beacon that is a member is a gateway too; a revocation file
	// copied into its state directory closes the publication at its next
	// scan, every 2 seconds.
	beacon := n.beacon
	onBeacon := netip.AddrPortFrom(beacon.Host.Addr, publicPort)
	beaconPub := filepath.Join(dir, "board-on-beacon.pub")
	burrow(t, "publish", "sign", "--ca", caDir, "--service", fmt.Sprintf("%s:%d", board.Config.Cert, servicePort),
		"--on", beacon.Config.Cert, "--listen", onBeacon.String(), "--out", beaconPub)
	burrow(t, "publish", "add", beaconPub, "--socket", beacon.Config.ControlSocket)
	if body, err := fetch(onBeacon, serviceCA); err != nil || !strings.Contains(body, "s_server") {
		t.Fatalf("fetching the service through the beacon: %v: %.300s", err, body)
	}
	conn = openTLS(t, outside, onBeacon, serviceCA)
	revokedDir := filepath.Join(beacon.Dir, publish.RevokedDir)
	if err := os.MkdirAll(revokedDir, 0o755); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	burrow(t, "publish", "revoke", "--ca", caDir, beaconPub, "--out", filepath.Join(revokedDir, "board-on-beacon.pubrev"))
	cut = waitCutWithin(t, conn, start, scanPeriod+cutWithin)
	if err := waitRefusedWithin(t, func(uint16) error { return refusedAt(onBeacon) }, start, scanPeriod+cutWithin); err != nil {
		t.Fatalf("after the revocation file was copied in: %v", err)
	}
	t.Logf("revoked by a file in the beacon's %s: open connection cut %v after the file was written", publish.RevokedDir, cut.Round(time.Millisecond))
	if p := gw.Process; p == nil || p.Exited() {
		t.Error("the gateway stopped")
	}
}

// badPublications hands the gateway publications it must refuse: of
// another CA, expired, malformed, on a listen address already taken, of a
// service the gateway would not reach through the network (its own
// loopback, its own address). Each error says what is wrong, and nothing
// is exposed.
func badPublications(t *testing.T, nw *cluster.Network, gw, board *cluster.Node, dir string) {
	t.Helper()
	otherCA, err := identity.NewCA(nw.Name, crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	taken := netip.AddrPortFrom(gw.Host.Addr, publicPort+1)
	holder, err := inside(gw.Host, func() (net.Listener, error) { return net.Listen("tcp", taken.String()) })
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	template := identity.Publication{
		Member: board.ID, MemberName: board.Name, Service: netip.AddrPortFrom(board.Address.Addr(), servicePort),
		Gateway: gw.ID, GatewayName: gw.Name, Listen: netip.AddrPortFrom(gw.Host.Addr, publicPort),
	}
	sign := func(ca *identity.CA, p identity.Publication, issued time.Time) string {
		signed, err := identity.SignPublication(ca, p, issued, time.Hour, crand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, signed.SerialString()+".pub")
		if err := identity.SavePublication(path, signed); err != nil {
			t.Fatal(err)
		}
		return path
	}
	garbage := filepath.Join(dir, "garbage.pub")
	if err := os.WriteFile(garbage, []byte("-----BEGIN BURROW PUBLICATION-----\nAAAA\n-----END BURROW PUBLICATION-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	onTaken := template
	onTaken.Listen = taken
	gatewaysOwn := template
	gatewaysOwn.Service = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), 22)
	gatewaysTAP := template
	gatewaysTAP.Service = netip.AddrPortFrom(gw.Address.Addr(), 22)
	for _, c := range []struct{ what, file, says string }{
		{"of another CA", sign(otherCA, template, time.Now()), "this node trusts"},
		{"expired", sign(nw.CA, template, time.Now().Add(-2*time.Hour)), "expired at"},
		{"malformed", garbage, "malformed"},
		{"on a taken address", sign(nw.CA, onTaken, time.Now()), "address already in use"},
		{"of the gateway's loopback", sign(nw.CA, gatewaysOwn, time.Now()), "is outside the network"},
		{"of the gateway's own address in the network", sign(nw.CA, gatewaysTAP, time.Now()), "is this node's own"},
	} {
		out, err := burrowErr("publish", "add", c.file, "--socket", gw.Config.ControlSocket)
		if err == nil || !strings.Contains(out, c.says) {
			t.Errorf("a publication %s: %v: %s (want an error saying %q)", c.what, err, out, c.says)
		} else {
			t.Logf("a publication %s: %s", c.what, strings.TrimSpace(out))
		}
	}
	// Listed in the configuration beside a good one, a bad one leaves
	// everything as it was.
	good := sign(nw.CA, template, time.Now())
	gw.Config.Publish = []string{good, garbage}
	if err := gw.Reload(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // SIGHUP is handled at once; give it the time anyway
	if st, err := gw.Status(); err != nil || len(st.Publications) != 0 {
		t.Errorf("a configuration with a malformed publication was applied in part: %+v, %v", st, err)
	}
	gw.Config.Publish = nil
	if err := gw.Reload(); err != nil {
		t.Fatal(err)
	}
}

// publicationFile signs a publication of member's port 22 on the node
// whose state directory is gatewayDir, listening on listen, and returns
// its file.
func publicationFile(t *testing.T, nw *cluster.Network, member *cluster.Node, gatewayDir string, listen netip.AddrPort) string {
	t.Helper()
	key, err := identity.LoadNodeKey(filepath.Join(gatewayDir, identity.NodeKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	p, err := identity.SignPublication(nw.CA, identity.Publication{
		Member: member.ID, MemberName: member.Name, Service: netip.AddrPortFrom(member.Address.Addr(), 22),
		Gateway: key.ID(), GatewayName: filepath.Base(gatewayDir), Listen: listen,
	}, time.Now(), time.Hour, crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "member.pub")
	if err := identity.SavePublication(path, p); err != nil {
		t.Fatal(err)
	}
	return path
}

// lineWith is the line of text that starts with prefix, "" without one.
func lineWith(text, prefix string) string {
	for line := range strings.Lines(text) {
		if strings.HasPrefix(line, prefix) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

// burrow runs the burrow CLI and fails the test when it fails.
func burrow(t *testing.T, args ...string) string {
	t.Helper()
	out, err := burrowErr(args...)
	if err != nil {
		t.Fatalf("burrow %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return out
}

func burrowErr(args ...string) (string, error) {
	out, err := exec.Command(burrowBin, args...).CombinedOutput()
	return string(out), err
}

// publication is the gateway's only publication's status.
func publication(t *testing.T, gw *cluster.Node) publish.Status {
	t.Helper()
	st, err := gw.Status()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Publications) != 1 {
		t.Fatalf("the gateway lists %d publications, want 1: %+v", len(st.Publications), st.Publications)
	}
	return st.Publications[0]
}

func waitPublished(t *testing.T, gw *cluster.Node, want int) {
	t.Helper()
	err := cluster.WaitFor(ctxFor(t, 10*time.Second), fmt.Sprintf("the gateway to list %d publications", want), func() bool {
		st, err := gw.Status()
		return err == nil && len(st.Publications) == want
	})
	if err != nil {
		t.Fatal(err)
	}
}

// waitRefused retries check until the gateway's port refuses connections,
// failing after cutWithin since start.
func waitRefused(t *testing.T, check func(uint16) error, start time.Time) error {
	t.Helper()
	return waitRefusedWithin(t, check, start, cutWithin)
}

// waitRefusedWithin is waitRefused failing after limit.
func waitRefusedWithin(t *testing.T, check func(uint16) error, start time.Time, limit time.Duration) error {
	t.Helper()
	for {
		err := check(publicPort)
		if err == nil {
			return nil
		}
		if time.Since(start) > limit {
			return fmt.Errorf("still not refused %v after it was cut: %w", time.Since(start).Round(time.Millisecond), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// openTLS opens, from host, a TLS connection to the service through
// addr, verifying the service's certificate, and leaves it open.
func openTLS(t *testing.T, host *netlab.Host, addr netip.AddrPort, caFile string) *tls.Conn {
	t.Helper()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	conn, err := inside(host, func() (*tls.Conn, error) {
		d := &net.Dialer{Timeout: 10 * time.Second}
		return tls.DialWithDialer(d, "tcp", addr.String(), &tls.Config{RootCAs: roots, ServerName: serviceName})
	})
	if err != nil {
		t.Fatalf("TLS to the service through %s: %v", addr, err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// waitCut waits for the server side of conn to end it, and says how long
// after start that was; it fails the test after cutWithin.
func waitCut(t *testing.T, conn *tls.Conn, start time.Time) time.Duration {
	t.Helper()
	return waitCutWithin(t, conn, start, cutWithin)
}

// waitCutWithin is waitCut failing after limit.
func waitCutWithin(t *testing.T, conn *tls.Conn, start time.Time, limit time.Duration) time.Duration {
	t.Helper()
	conn.SetReadDeadline(start.Add(limit))
	_, err := conn.Read(make([]byte, 1))
	took := time.Since(start)
	var timeout net.Error
	if errors.As(err, &timeout) && timeout.Timeout() {
		t.Fatalf("the open connection still stands %v after it was cut", took.Round(time.Millisecond))
	}
	if err == nil {
		t.Fatal("the service sent data on an idle connection instead of the connection ending")
	}
	return took
}

// writeServiceCertificates writes the HTTPS service's own CA and its
// certificate for serviceName, unrelated to burrow's CA, and returns the
// CA certificate's path.
func writeServiceCertificates(t *testing.T, dir string) string {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTemplate := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "board's own CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(crand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: serviceName}, DNSNames: []string{serviceName},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(crand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for name, block := range map[string]*pem.Block{
		"service-ca.crt": {Type: "CERTIFICATE", Bytes: caDER},
		"service.crt":    {Type: "CERTIFICATE", Bytes: leafDER},
		"service.key":    {Type: "PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "service-ca.crt")
}
