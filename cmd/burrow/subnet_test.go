package main

import (
	"encoding/json"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"burrow/node"
	"burrow/runtime"
)

// subnetStatus is sampleStatus with container subnets: the IPv4 one
// claimed on its second candidate, the first being beta's, and the IPv6
// one still being claimed.
func subnetStatus(now time.Time) *runtime.Status {
	st := sampleStatus(now)
	st.Services.Subnets = []node.SubnetStatus{
		{Family: "ipv4", Prefix: netip.MustParsePrefix("10.83.18.32/28"), State: "claimed", Attempt: 1,
			Expires: now.Add(10 * time.Minute), Bridge: "bw-cni0",
			Collisions: []node.SubnetCollision{{Prefix: netip.MustParsePrefix("10.83.77.0/28"), Holder: betaID}}},
		{Family: "ipv6", Prefix: netip.MustParsePrefix("fd53:7769:726c:1:2:3:4:0/112"), State: "claiming", Bridge: "bw-cni0"},
	}
	return st
}

func TestSubnetShowsEachClaimAndCollision(t *testing.T) {
	out, err := runOpsCLI(t, "subnet", "--socket", fakeNode(t, subnetStatus(time.Now())))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := [][]string{
		{"FAMILY", "SUBNET", "STATE", "BRIDGE", "GATEWAY", "CONTAINERS"},
		{"ipv4", "10.83.18.32/28", "claimed", "bw-cni0", "10.83.18.34", "10.83.18.40-10.83.18.47"},
		{"ipv6", "fd53:7769:726c:1:2:3:4:0/112", "claiming", "bw-cni0", "-", "-"},
		{"collision: ipv4 10.83.77.0/28 is held by beta (b2b2b2b2)"},
	}
	if len(lines) != len(want) {
		t.Fatalf("want %d lines:\n%s", len(want), out)
	}
	for i, fields := range want {
		for _, f := range fields {
			if !strings.Contains(lines[i], f) {
				t.Errorf("line %d lacks %q:\n%s", i+1, f, out)
			}
		}
	}
}

func TestSubnetJSON(t *testing.T) {
	out, err := runOpsCLI(t, "subnet", "--json", "--socket", fakeNode(t, subnetStatus(time.Now())))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Enabled bool `json:"enabled"`
		Subnets []struct {
			Family, Prefix, State, Bridge, Gateway, Containers string
			Attempt                                            int
			Collisions                                         []struct{ Prefix, Holder string }
		} `json:"subnets"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if !got.Enabled || len(got.Subnets) != 2 {
		t.Fatalf("want subnets enabled with two claims:\n%s", out)
	}
	v4, v6 := got.Subnets[0], got.Subnets[1]
	if v4.Family != "ipv4" || v4.Prefix != "10.83.18.32/28" || v4.State != "claimed" || v4.Attempt != 1 || v4.Bridge != "bw-cni0" ||
		v4.Gateway != "10.83.18.34" || v4.Containers != "10.83.18.40-10.83.18.47" ||
		len(v4.Collisions) != 1 || v4.Collisions[0].Holder != betaID || v4.Collisions[0].Prefix != "10.83.77.0/28" {
		t.Errorf("ipv4 claim: %+v", v4)
	}
	if v6.State != "claiming" || v6.Gateway != "" || v6.Containers != "" {
		t.Errorf("an unclaimed subnet has no gateway or containers yet: %+v", v6)
	}
}

func TestSubnetSaysWhenSubnetsAreOff(t *testing.T) {
	sock := fakeNode(t, sampleStatus(time.Now()))
	out, err := runOpsCLI(t, "subnet", "--socket", sock)
	if err != nil || !strings.Contains(out, "container subnets are off") || !strings.Contains(out, "services.subnets.enabled: true") {
		t.Errorf("subnets off: %v\n%s", err, out)
	}
	out, err = runOpsCLI(t, "subnet", "--json", "--socket", sock)
	if err != nil || strings.Join(strings.Fields(out), "") != `{"enabled":false,"subnets":[]}` {
		t.Errorf("subnets off, --json: %v\n%s", err, out)
	}
}

func TestSubnetWithoutDaemonSaysSo(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	_, err := runOpsCLI(t, "subnet", "--socket", sock)
	if err == nil || !strings.Contains(err.Error(), "cannot reach burrow at "+sock) {
		t.Errorf("want the error burrow status gives, got %v", err)
	}
}
