package config

import (
	"errors"
	"net/netip"
	"testing"

	"burrow/firewall"
)

func TestFirewallSectionCompiles(t *testing.T) {
	c, err := Parse([]byte(minimal + `
firewall:
  other_ethertypes: allow
  conntrack: {tcp_timeout: 1h}
  outbound:
    - host: any
  inbound:
    - port: 5432
      proto: tcp
      group: app
    - proto: icmp
      icmp_type: 8
      cidr: 10.9.0.0/16
    - port: 8000-8080
      proto: udp
      host: web1
      groups: [prod, eu]
`))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Firewall.Policy
	want := []firewall.Rule{
		{Proto: firewall.ProtoTCP, FirstPort: 5432, LastPort: 5432, ICMPType: firewall.AnyICMPType, Groups: []string{"app"}},
		{Proto: firewall.ProtoICMP, ICMPType: 8, CIDR: netip.MustParsePrefix("10.9.0.0/16")},
		{Proto: firewall.ProtoUDP, FirstPort: 8000, LastPort: 8080, ICMPType: firewall.AnyICMPType, Host: "web1", Groups: []string{"prod", "eu"}},
	}
	if !p.OtherEthertypes || len(p.Outbound) != 1 || p.Outbound[0].Host != "" || len(p.Inbound) != len(want) || p.TCPTimeout != 3600e9 {
		t.Fatalf("policy %+v", p)
	}
	for i, r := range p.Inbound {
		if r.Proto != want[i].Proto || r.FirstPort != want[i].FirstPort || r.LastPort != want[i].LastPort || r.ICMPType != want[i].ICMPType ||
			r.Host != want[i].Host || r.CIDR != want[i].CIDR || len(r.Groups) != len(want[i].Groups) {
			t.Errorf("inbound[%d] = %+v, want %+v", i, r, want[i])
		}
	}
}

func TestFirewallErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct{ yaml, field string }{
		{"firewall: {other_ethertypes: maybe}\n", "firewall.other_ethertypes"},
		{"firewall: {conntrack: {udp_timeout: -1s}}\n", "firewall.conntrack.udp_timeout"},
		{"firewall: {inbound: [{proto: sctp, host: any}]}\n", "firewall.inbound[0].proto"},
		{"firewall: {inbound: [{port: 22, host: any}]}\n", "firewall.inbound[0].port"},
		{"firewall: {inbound: [{port: 0, proto: tcp, host: any}]}\n", "firewall.inbound[0].port"},
		{"firewall: {inbound: [{port: 90-80, proto: tcp, host: any}]}\n", "firewall.inbound[0].port"},
		{"firewall: {inbound: [{port: http, proto: tcp, host: any}]}\n", "firewall.inbound[0].port"},
		{"firewall: {inbound: [{icmp_type: 8, host: any}]}\n", "firewall.inbound[0].icmp_type"},
		{"firewall: {inbound: [{proto: icmp, icmp_type: 300, host: any}]}\n", "firewall.inbound[0].icmp_type"},
		{"firewall: {outbound: [{host: \"two words\"}]}\n", "firewall.outbound[0].host"},
		{"firewall: {inbound: [{host: any}, {group: \"Bad Group\"}]}\n", "firewall.inbound[1].groups"},
		{"firewall: {inbound: [{cidr: 10.9.0.0}]}\n", "firewall.inbound[0].cidr"},
		{"firewall: {inbound: [{proto: tcp, port: 22}]}\n", "firewall.inbound[0]"},
		{"firewall: {inbound: [{host: any}]}\nkernel_path: {enabled: true, trusted: [10.0.0.0/8], port: 9}\n", "firewall"},
	} {
		_, err := Parse([]byte(minimal + tc.yaml))
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("config %q: error %v, want one naming %s", tc.yaml, err, tc.field)
		}
	}
	if _, err := Parse([]byte(minimal + "firewall: {inbound: [{host: any, prot: tcp}]}\n")); err == nil {
		t.Error("a misspelt rule field was accepted")
	}
}
