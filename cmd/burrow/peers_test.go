package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"burrow/node"
	"burrow/runtime"
)

const (
	alphaID = "a1a1a1a1000000000000000000000000"
	betaID  = "b2b2b2b2000000000000000000000000"
	gammaID = "c3c3c3c3000000000000000000000000"
	deltaID = "d4d4d4d4000000000000000000000000"
)

// sampleStatus is a node with a successor link to beta (measured, relayed),
// a long-distance link gamma asked for, a connecting link without a name,
// and a predecessor delta it has no link to.
func sampleStatus(now time.Time) *runtime.Status {
	return &runtime.Status{
		Name: "alpha", Network: "home",
		Status: node.Status{
			NodeID: alphaID,
			Links: []node.LinkStatus{
				{Peer: "beta", NodeID: betaID, State: "up", Path: "relay", Endpoint: "192.0.2.2:51820", RTT: 1.25,
					LastHandshake: now.Add(-90 * time.Second), RxBytes: 2048, TxBytes: 10, RxPackets: 2, TxPackets: 1},
				{Peer: "gamma", NodeID: gammaID, State: "up", Path: "direct", Endpoint: "192.0.2.3:51820",
					LastHandshake: now.Add(-5 * time.Second), CertNotAfter: now.Add(12*24*time.Hour + time.Hour)},
				{State: "connecting", Path: "direct", Endpoint: "192.0.2.9:51820"},
			},
			Overlay: node.OverlayStatus{
				Enabled: true, Joined: true, SizeEstimate: 4, Predecessor: deltaID, Successors: []string{betaID, gammaID},
				Links: []node.OverlayLink{
					{Peer: betaID, Local: []string{"successor"}, Remote: []string{"long-distance"}},
					{Peer: gammaID, Local: []string{}, Remote: []string{"long-distance"}},
				},
			},
		},
	}
}

// fakeNode answers status requests on a control socket like a daemon.
func fakeNode(t *testing.T, st *runtime.Status) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "control.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			bufio.NewReader(c).ReadBytes('\n')
			json.NewEncoder(c).Encode(runtime.Response{Status: st})
			c.Close()
		}
	}()
	return path
}

func runOpsCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := &cobra.Command{Use: "burrow", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(newPeersCmd(), newTopologyCmd(), newSubnetCmd())
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestPeersShowsOneRowPerLink(t *testing.T) {
	sock := fakeNode(t, sampleStatus(time.Now()))
	out, err := runOpsCLI(t, "peers", "--socket", sock)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 {
		t.Fatalf("want a header, 3 rows and a line on gamma's certificate:\n%s", out)
	}
	if !strings.HasPrefix(lines[4], "gamma's certificate expires on ") || !strings.Contains(lines[4], "in 12 days") || strings.Contains(out, "beta's certificate") {
		t.Errorf("want a warning of gamma's certificate, 12 days from its end, and none of beta's:\n%s", out)
	}
	for i, want := range [][]string{
		{"PEER", "NODE ID", "KIND", "PATH", "RTT", "HANDSHAKE"},
		{"beta", "b2b2b2b2", "successor", "up", "relay", "192.0.2.2:51820", "1.25 ms", "2.0 KiB", "10 B", "1m30s ago"},
		{"gamma", "c3c3c3c3", "long-distance (peer's)", "direct", "192.0.2.3:51820", "5s ago"},
		{"-", "connecting", "192.0.2.9:51820"},
	} {
		for _, field := range want {
			if !strings.Contains(lines[i], field) {
				t.Errorf("line %d lacks %q: %s", i, field, lines[i])
			}
		}
	}
	// No measurement, no handshake: dashes, not zeros.
	if f := strings.Fields(lines[3]); f[len(f)-1] != "-" || !strings.Contains(lines[3], "  -  ") {
		t.Errorf("connecting link shows made-up values: %s", lines[3])
	}
	if strings.Contains(lines[2], "ms") {
		t.Errorf("gamma has no RTT measurement but shows one: %s", lines[2])
	}
}

func TestPeersJSON(t *testing.T) {
	sock := fakeNode(t, sampleStatus(time.Now()))
	out, err := runOpsCLI(t, "peers", "--json", "--socket", sock)
	if err != nil {
		t.Fatal(err)
	}
	var rows []peerRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if len(rows) != 3 || rows[0].Peer != "beta" || rows[0].RTTms == nil || *rows[0].RTTms != 1.25 ||
		rows[0].Kinds[0] != "successor" || rows[0].PeerKinds[0] != "long-distance" || rows[0].RxBytes != 2048 {
		t.Fatalf("rows %+v", rows)
	}
	if rows[1].RTTms != nil || rows[2].HandshakeAge != nil || *rows[0].HandshakeAge < 89 {
		t.Errorf("missing values made up or ages wrong: %+v", rows)
	}
}

func TestPeersWithoutNodeSaysHow(t *testing.T) {
	_, err := runOpsCLI(t, "peers", "--socket", filepath.Join(t.TempDir(), "none.sock"))
	if err == nil || !strings.Contains(err.Error(), "burrow up") {
		t.Fatalf("no daemon: %v", err)
	}
}

func TestTopologyDotAndJSON(t *testing.T) {
	sock := fakeNode(t, sampleStatus(time.Now()))
	out, err := runOpsCLI(t, "topology", "--format", "dot", "--socket", sock)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"` + alphaID + `" -> "` + betaID + `" [dir=none, label="successor / long-distance via relay", style=bold]`,
		`"` + alphaID + `" -> "` + gammaID + `" [dir=none, label="long-distance (peer's)", color="gray50"]`,
		`"` + deltaID + `" -> "` + alphaID + `" [label="predecessor"`,
		`"` + betaID + `" -> "` + gammaID + `" [label="successor 2"`,
		`label="beta\nb2b2b2b2"`,
		`label="d4d4d4d4", style="rounded,dashed"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("dot output lacks %s:\n%s", want, out)
		}
	}
	if dot, err := exec.LookPath("dot"); err == nil {
		cmd := exec.Command(dot, "-Tsvg")
		cmd.Stdin = strings.NewReader(out)
		if svg, err := cmd.CombinedOutput(); err != nil || !bytes.Contains(svg, []byte("<svg")) {
			t.Errorf("Graphviz rejects the dot output: %v\n%s", err, svg)
		}
	}

	out, err = runOpsCLI(t, "topology", "--format", "json", "--socket", sock)
	if err != nil {
		t.Fatal(err)
	}
	var topo topology
	if err := json.Unmarshal([]byte(out), &topo); err != nil {
		t.Fatal(err)
	}
	if topo.Name != "alpha" || topo.Predecessor != deltaID || len(topo.Successors) != 2 || len(topo.Links) != 3 || topo.Links[0].Kinds[0] != "successor" {
		t.Errorf("topology %+v", topo)
	}
}

func TestTopologySVG(t *testing.T) {
	sock := fakeNode(t, sampleStatus(time.Now()))
	if _, err := exec.LookPath("dot"); err == nil {
		out, err := runOpsCLI(t, "topology", "--format", "svg", "--socket", sock)
		if err != nil || !strings.Contains(out, "<svg") || !strings.Contains(out, "alpha") {
			t.Errorf("svg: %v\n%.300s", err, out)
		}
	}
	t.Setenv("PATH", t.TempDir())
	_, err := runOpsCLI(t, "topology", "--format", "svg", "--socket", sock)
	if err == nil || !strings.Contains(err.Error(), "graphviz") || !strings.Contains(err.Error(), "--format dot") {
		t.Fatalf("svg without Graphviz: %v", err)
	}
	if _, err := runOpsCLI(t, "topology", "--format", "png", "--socket", sock); err == nil || !strings.Contains(err.Error(), "dot, json, svg") {
		t.Fatalf("unknown format: %v", err)
	}
}

func TestCertificateLineWarnsAheadOfExpiry(t *testing.T) {
	now := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		status runtime.CertificateStatus
		want   string
	}{
		{runtime.CertificateStatus{NotAfter: now.Add(400 * 24 * time.Hour), Issuer: "0a1b"}, "valid until 2028-02-05 (400 days), CA 0a1b"},
		{runtime.CertificateStatus{NotAfter: now.Add(12 * 24 * time.Hour), Issuer: "0a1b", ExpiresSoon: true}, "EXPIRES on 2027-01-13, in 12 days"},
		{runtime.CertificateStatus{NotAfter: now.Add(-time.Hour), ExpiresSoon: true}, "EXPIRED on 2026-12-31"},
	} {
		if got := certificateLine(c.status, now); !strings.HasPrefix(got, c.want) {
			t.Errorf("certificate line %q, want it to start %q", got, c.want)
		}
	}
}
