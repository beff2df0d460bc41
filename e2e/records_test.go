package e2e

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"burrow/netlab/cluster"
	"burrow/runtime"
)

// dhtAs runs `burrow dht ARGS --json` against node's daemon, in its name.
func dhtAs(n *cluster.Node, args ...string) (runtime.DHTAnswer, string, error) {
	cmd := exec.Command(burrowBin, append(append([]string{"dht"}, args...), "--json", "--socket", n.Config.ControlSocket)...)
	out, err := cmd.CombinedOutput()
	var a runtime.DHTAnswer
	if line, _, ok := strings.Cut(string(out), "\n"); ok {
		json.Unmarshal([]byte(line), &a)
	}
	return a, string(out), err
}

// TestNoMemberCanOverwriteAnothersLeaseOrName: a member holds a DHCP lease
// for a client behind it and its name in the virtual DNS; another member,
// with a valid certificate, tries to overwrite and delete both through its
// own node (`burrow dht put` and `delete`). Both are refused, naming the
// owner; the records, the name's resolution and the lease stay as they were.
func TestNoMemberCanOverwriteAnothersLeaseOrName(t *testing.T) {
	_, nw := servicesNetwork(t, 4)
	victim, attacker, reader := nw.Nodes[3], nw.Nodes[1], nw.Nodes[0]
	client, err := victim.Host.AddContainer("cv", "br0")
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, 60*time.Second)
	if out, err := client.Run(ctx, "udhcpc", "-i", "eth0", "-n", "-q", "-t", "10", "-T", "2", "-x", "hostname:cv",
		"-s", "/etc/udhcpc/default.script"); err != nil {
		t.Fatalf("udhcpc behind %s: %v\n%s", victim.Name, err, out)
	}
	out, _ := client.Run(ctx, "ip", "-4", "addr", "show", "dev", "eth0")
	m := leasedAddr.FindSubmatch(out)
	if m == nil {
		t.Fatalf("the client got no address:\n%s", out)
	}
	leaseKey := "dhcp:10.99.0.0/24:" + string(m[1])
	nameKey := "dns:burrow.test:" + victim.Name
	before := map[string]runtime.DHTAnswer{}
	for _, key := range []string{leaseKey, nameKey} {
		err := cluster.WaitFor(ctx, key+" to be held by "+victim.Name, func() bool {
			a, _, err := dhtAs(attacker, "get", key)
			before[key] = a
			return err == nil && a.Owner == victim.ID.String()
		})
		if err != nil {
			_, out, _ := dhtAs(attacker, "get", key)
			t.Fatalf("%v: %s", err, out)
		}
	}
	for _, key := range []string{leaseKey, nameKey} {
		for _, attempt := range [][]string{{"put", key, "10.99.0.66"}, {"delete", key}} {
			a, out, err := dhtAs(attacker, attempt...)
			if err == nil || a.Status != "denied" || a.Owner != victim.ID.String() || !strings.Contains(out, "belongs to node "+victim.ID.String()) {
				t.Errorf("%s by %s: want a refusal naming the owner, got status %q (err %v):\n%s", strings.Join(attempt, " "), attacker.Name, a.Status, err, out)
			}
		}
		a, out, err := dhtAs(reader, "get", key)
		if err != nil || a.Owner != victim.ID.String() || string(a.Value) != string(before[key].Value) {
			t.Errorf("%s after the attempts: %v\n%s (before: value %q owner %s)", key, err, out, before[key].Value, before[key].Owner)
		}
	}
	dig, _ := reader.Host.Run(ctx, "dig", "@10.99.0.1", "+short", "+time=2", "+tries=2", victim.Name+".burrow.test")
	if got := strings.TrimSpace(string(dig)); got != victim.Address.Addr().String() {
		t.Errorf("%s.burrow.test resolves to %q after the attempts, want %s", victim.Name, got, victim.Address.Addr())
	}
	// The attacker may still write in its own name.
	if _, out, err := dhtAs(attacker, "put", "note:"+attacker.Name, "mine", "--ttl", "1m"); err != nil {
		t.Errorf("a record of the attacker's own: %v\n%s", err, out)
	}
}
