package config

import (
	"errors"
	"strings"
	"testing"
)

const minimal = `
network: demo
ca: /etc/burrow/ca.crt
cert: /etc/burrow/node.crt
`

func TestMinimalConfigGetsDefaults(t *testing.T) {
	c, err := Parse([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	if c.ListenAddr.Port() != 51820 || c.TAP.Name != DefaultTAPName || !c.TAP.OffloadOn || c.UnderlayMTU != 1500 || c.StateDir != DefaultStateDir {
		t.Fatalf("defaults not applied: %+v", c)
	}
}

func TestFullConfigParses(t *testing.T) {
	c, err := Parse([]byte(minimal + `
listen: "[::]:4000"
tap: {name: bw1, mtu: 1400, mac: "02:00:00:00:00:07", addresses: [10.1.0.1/24, "fd00::1/64"], queues: 2, offload: false}
peers:
  - endpoint: 192.0.2.1:4000
    public_key: AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=
links: {keepalive: 1s, dead_after: 3s}
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.TAP.Prefixes) != 2 || !c.TAP.HasMAC || c.TAP.OffloadOn || c.Peers[0].Key == nil || c.Peers[0].Key[31] != 31 {
		t.Fatalf("fields not decoded: %+v", c)
	}
}

// TestErrorsNameTheField is the table of bad configurations an operator
// may write; each error must point at the field.
func TestErrorsNameTheField(t *testing.T) {
	cases := []struct {
		yaml, field string
	}{
		{"ca: a\ncert: b\n", "network"},
		{"network: x\ncert: b\n", "ca"},
		{"network: x\nca: a\n", "cert"},
		{minimal + "listen: 51820\n", "listen"},
		{minimal + "underlay_mtu: 100\n", "underlay_mtu"},
		{minimal + "tap: {name: way-too-long-interface}\n", "tap.name"},
		{minimal + "tap: {mtu: 70000}\n", "tap.mtu"},
		{minimal + "tap: {mac: nonsense}\n", "tap.mac"},
		{minimal + "tap: {mac: \"01:00:5e:00:00:01\"}\n", "tap.mac"},
		{minimal + "tap: {addresses: [10.0.0.1]}\n", "tap.addresses[0]"},
		{minimal + "tap: {queues: 99}\n", "tap.queues"},
		{minimal + "tap: {local_dhcp: true}\n", "tap.local_dhcp"},
		{minimal + "peers: [{endpoint: nowhere}]\n", "peers[0].endpoint"},
		{minimal + "publish: [a.pub, \"\"]\n", "publish[1]"},
		{minimal + "publish: [a.pub, b.pub, a.pub]\n", "publish[2]"},
		{minimal + "tap: {enabled: false}\npublish: [a.pub]\n", "publish[0]"},
		{minimal + "peers: [{endpoint: 192.0.2.1:1, public_key: short}]\n", "peers[0].public_key"},
		{minimal + "links: {keepalive: 2s, dead_after: 3s}\n", "links.dead_after"},
		{minimal + "metrics: {listen: 9101}\n", "metrics.listen"},
		{minimal + "metrics: {listen: \"localhost:9101\"}\n", "metrics.listen"},
		{minimal + "metrics: {listen: \"127.0.0.1:0\"}\n", "metrics.listen"},
		{minimal + "dashboard: {listen: 8080}\n", "dashboard.listen"},
		{minimal + "dashboard: {listen: \"localhost:8080\"}\n", "dashboard.listen"},
		{minimal + "dashboard: {listen: \"127.0.0.1:0\"}\n", "dashboard.listen"},
		{minimal + "metrics: {listen: \"127.0.0.1:9101\"}\ndashboard: {listen: \"127.0.0.1:9101\"}\n", "dashboard.listen"},
		{minimal + "log: {level: loud}\n", "log.level"},
		{minimal + "log: {format: xml}\n", "log.format"},
		{minimal + "overlay: {bootstrap: [somewhere]}\n", "overlay.bootstrap[0]"},
		{minimal + "overlay: {advertise: [\"0.0.0.0:1\"]}\n", "overlay.advertise[0]"},
		{minimal + "overlay: {long_distance: many}\n", "overlay.long_distance"},
		{minimal + "overlay: {successors: 20}\n", "overlay.successors"},
		{minimal + "beacons: [{address: here}]\n", "beacons[0].address"},
		{minimal + "beacons: [{address: \"192.0.2.1:1\", websocket: \"http://x\"}]\n", "beacons[0].websocket"},
		{minimal + "beacon: {websocket: {listen: \":443\", cert: a.pem}}\n", "beacon.websocket.cert"},
		{minimal + "turn: {server: nowhere}\n", "turn.server"},
		{minimal + "turn: {server: \"192.0.2.1:3478\"}\n", "turn.username"},
		{minimal + "relay: {max_rate: -1}\n", "relay.max_rate"},
		{minimal + "rendezvous: {xmpp: {jid: example.org, password: p, pubsub: pubsub.example.org}}\n", "rendezvous.xmpp.jid"},
		{minimal + "rendezvous: {xmpp: {jid: \"a@example.org/laptop\", password: p, pubsub: pubsub.example.org}}\n", "rendezvous.xmpp.jid"},
		{minimal + "rendezvous: {xmpp: {jid: a@example.org, server: example.org, password: p, pubsub: pubsub.example.org}}\n", "rendezvous.xmpp.server"},
		{minimal + "rendezvous: {xmpp: {jid: a@example.org, server: \"example.org:99999\", password: p, pubsub: pubsub.example.org}}\n", "rendezvous.xmpp.server"},
		{minimal + "rendezvous: {xmpp: {jid: a@example.org, pubsub: pubsub.example.org}}\n", "rendezvous.xmpp.password"},
		{minimal + "rendezvous: {xmpp: {jid: a@example.org, password: p, password_file: /etc/p, pubsub: pubsub.example.org}}\n", "rendezvous.xmpp.password_file"},
		{minimal + "rendezvous: {xmpp: {jid: a@example.org, password: p}}\n", "rendezvous.xmpp.pubsub"},
		{minimal + "rendezvous: {xmpp: {jid: a@example.org, password: p, pubsub: \"x@pubsub.example.org\"}}\n", "rendezvous.xmpp.pubsub"},
		{minimal + "rendezvous: {xmpp: {jid: a@example.org, password: p, pubsub: pubsub.example.org, max_items: 100000}}\n", "rendezvous.xmpp.max_items"},
		{minimal + "rendezvous: {xmpp: {jid: a@example.org, password: p, pubsub: pubsub.example.org, contacts: -1}}\n", "rendezvous.xmpp.contacts"},
		{minimal + "overlay: {enabled: false}\nrendezvous: {xmpp: {jid: a@example.org, password: p, pubsub: pubsub.example.org}}\n", "rendezvous.xmpp.jid"},
		{minimal + "services: {dns: {enabled: true}}\n", "services.network"},
		{minimal + "services: {network: 10.99.0.0}\n", "services.network"},
		{minimal + "services: {network: 10.99.0.0/24, dhcp: {enabled: true, range: 10.99.0.9}}\n", "services.dhcp.range"},
		{minimal + "services: {network: 10.99.0.0/24, dhcp: {enabled: true, range: 10.98.0.1-10.99.0.9}}\n", "services.dhcp.range"},
		{minimal + "services: {network: 10.99.0.0/24, dhcp: {enabled: true, gateway: 10.1.1.1}}\n", "services.dhcp.gateway"},
		{minimal + "services: {network: 10.99.0.0/24, dns: {enabled: true, upstream: [nowhere]}}\n", "services.dns.upstream[0]"},
		{minimal + "services: {subnets: {enabled: true, families: [ipx]}}\n", "services.subnets.families[0]"},
	}
	for _, tc := range cases {
		_, err := Parse([]byte(tc.yaml))
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("config %q: error %v, want one naming %s", tc.yaml, err, tc.field)
		}
	}
}

func TestMetricsAreOffByDefaultAndParseAnAddress(t *testing.T) {
	c, err := Parse([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	if c.Metrics.Listen != "" || c.Metrics.ListenAddr.IsValid() {
		t.Fatalf("metrics on by default: %+v", c.Metrics)
	}
	c, err = Parse([]byte(minimal + "metrics: {listen: \"[::1]:9101\"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Metrics.ListenAddr.String() != "[::1]:9101" {
		t.Fatalf("metrics.listen decoded as %v", c.Metrics.ListenAddr)
	}
}

func TestDashboardIsOffByDefaultAndParsesAnAddress(t *testing.T) {
	c, err := Parse([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	if c.Dashboard.Listen != "" || c.Dashboard.ListenAddr.IsValid() {
		t.Fatalf("dashboard on by default: %+v", c.Dashboard)
	}
	c, err = Parse([]byte(minimal + "dashboard: {listen: \"127.0.0.1:8080\"}\nmetrics: {listen: \"127.0.0.1:9101\"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Dashboard.ListenAddr.String() != "127.0.0.1:8080" {
		t.Fatalf("dashboard.listen decoded as %v", c.Dashboard.ListenAddr)
	}
}

func TestUnknownFieldIsAnError(t *testing.T) {
	_, err := Parse([]byte(minimal + "lisen: 0.0.0.0:1\n"))
	if err == nil || !strings.Contains(err.Error(), "lisen") {
		t.Fatalf("typo not reported: %v", err)
	}
}

func TestXMPPRendezvousGetsDefaults(t *testing.T) {
	c, err := Parse([]byte(minimal + "rendezvous: {xmpp: {jid: node1@xmpp.example.org, password_file: /etc/burrow/xmpp.pass, pubsub: pubsub.xmpp.example.org}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	x := c.Rendezvous.XMPP
	if x.Server != "xmpp.example.org:5222" || x.Node != "burrow-demo" || x.MaxItems != DefaultXMPPMaxItems || x.Contacts != DefaultXMPPContacts || x.Account.Localpart() != "node1" {
		t.Fatalf("defaults not applied: %+v", x)
	}
	if strings.Contains(x.String(), "xmpp.pass") {
		t.Fatalf("String shows the password file: %s", x)
	}
}
