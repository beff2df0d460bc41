package vdns

import (
	"errors"
	"net/netip"
	"strconv"
	"strings"
)

// AutoName is the automatic name of ip in network, without the domain:
// "C" followed by three decimal digits for each byte of the address not
// wholly inside the network prefix. In 10.0.0.0/8, 10.5.123.44 is
// C005123044, as in the IPOP paper; in a /16 it is C123044. ok is false
// for addresses outside the network.
func AutoName(network netip.Prefix, ip netip.Addr) (name string, ok bool) {
	ip = ip.Unmap()
	if !network.Addr().Is4() || !ip.Is4() || !network.Contains(ip) {
		return "", false
	}
	b := ip.As4()
	var sb strings.Builder
	sb.WriteByte('C')
	for _, octet := range b[network.Bits()/8:] {
		if octet < 100 {
			sb.WriteByte('0')
		}
		if octet < 10 {
			sb.WriteByte('0')
		}
		sb.WriteString(strconv.Itoa(int(octet)))
	}
	return sb.String(), true
}

// ParseAutoName reverses AutoName, case-insensitively.
func ParseAutoName(network netip.Prefix, name string) (netip.Addr, bool) {
	if !network.Addr().Is4() {
		return netip.Addr{}, false
	}
	first := network.Bits() / 8
	digits := 3 * (4 - first)
	if len(name) != 1+digits || (name[0] != 'C' && name[0] != 'c') {
		return netip.Addr{}, false
	}
	b := network.Masked().Addr().As4()
	for i := range 4 - first {
		part := name[1+3*i : 4+3*i]
		v, err := strconv.ParseUint(part, 10, 8)
		if err != nil || part[0] == '+' || part[0] == '-' {
			return netip.Addr{}, false
		}
		b[first+i] = byte(v)
	}
	ip := netip.AddrFrom4(b)
	if !network.Contains(ip) {
		return netip.Addr{}, false
	}
	return ip, true
}

// looksAutomatic reports whether a name has the shape of an automatic
// name ("C" and digits); such names cannot be registered, so that a
// registration never shadows an address's name.
func looksAutomatic(name string) bool {
	if len(name) < 2 || (name[0] != 'C' && name[0] != 'c') {
		return false
	}
	return strings.Trim(name[1:], "0123456789") == ""
}

// errName reports a name that cannot be registered.
var errName = errors.New("vdns: names are dot-separated labels of letters, digits and hyphens, not of the automatic C<digits> form")

// canonicalName lower-cases a relative name and checks that it is made of
// LDH labels and not automatic.
func canonicalName(name string) (string, error) {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	if name == "" || len(name) > maxNameLen || looksAutomatic(strings.SplitN(name, ".", 2)[0]) {
		return "", errName
	}
	for _, label := range strings.Split(name, ".") {
		if !validLabel(label) {
			return "", errName
		}
	}
	return name, nil
}

// maxNameLen bounds registered names, leaving room for the domain in the
// 255 bytes a DNS name may have.
const maxNameLen = 128

func validLabel(label string) bool {
	if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
		return false
	}
	for i := 0; i < len(label); i++ {
		c := label[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// encodeAddrs is the DHT value of a name: its addresses, comma-separated.
func encodeAddrs(addrs []netip.Addr) []byte {
	parts := make([]string, len(addrs))
	for i, a := range addrs {
		parts[i] = a.Unmap().String()
	}
	return []byte(strings.Join(parts, ","))
}

// decodeAddrs reads a DHT value; values come from other nodes, so any
// malformed entry is skipped rather than trusted.
func decodeAddrs(v []byte) []netip.Addr {
	var out []netip.Addr
	for _, part := range strings.Split(string(v), ",") {
		if a, err := netip.ParseAddr(part); err == nil && a.Zone() == "" {
			out = append(out, a.Unmap())
		}
	}
	return out
}
