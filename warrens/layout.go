package warrens

import (
	"encoding/binary"
	"errors"
	"hash/fnv"
	"net/netip"
	"strconv"
	"strings"
)

// GlobalID is the string whose bytes mark an address as Warrens.
const GlobalID = "Swirl"

// Prefix lengths of the subnets.
const (
	IPv6Bits = 112
	IPv4Bits = 28
)

// Family selects the IPv4 or the IPv6 layout.
type Family uint8

// Families.
const (
	IPv6 Family = 6
	IPv4 Family = 4
)

func (f Family) String() string {
	if f == IPv4 {
		return "ipv4"
	}
	return "ipv6"
}

// NodeHash is the node identifier of a machine id: its 64-bit FNV-1a hash.
func NodeHash(machineID string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(machineID))
	return h.Sum64()
}

// ParseMachineID reads the content of /etc/machine-id: 32 hex digits,
// usually followed by a newline.
func ParseMachineID(content []byte) (string, error) {
	id := strings.TrimSpace(string(content))
	if len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" {
		return "", errors.New("warrens: machine id is not 32 lowercase hex digits")
	}
	return id, nil
}

// Candidate is the string hashed on the given attempt: the machine id
// itself first, then the machine id with "-<attempt>" appended.
func Candidate(machineID string, attempt int) string {
	if attempt == 0 {
		return machineID
	}
	return machineID + "-" + strconv.Itoa(attempt)
}

// Subnet is the container subnet of a node hash in family f.
func Subnet(f Family, nodeHash uint64) netip.Prefix {
	if f == IPv4 {
		node := uint16(nodeHash >> 52)
		a := [4]byte{10, GlobalID[0], byte(node >> 4), byte(node << 4)}
		return netip.PrefixFrom(netip.AddrFrom4(a), IPv4Bits)
	}
	var a [16]byte
	a[0] = 0xfd
	copy(a[1:6], GlobalID)
	binary.BigEndian.PutUint64(a[6:14], nodeHash)
	return netip.PrefixFrom(netip.AddrFrom16(a), IPv6Bits)
}

// IsWarrens reports whether p is a Warrens subnet of either layout.
func IsWarrens(p netip.Prefix) bool {
	a := p.Addr()
	switch {
	case a.Is4() && p.Bits() == IPv4Bits:
		b := a.As4()
		return b[0] == 10 && b[1] == GlobalID[0] && b[3]&0x0f == 0
	case a.Is6() && !a.Is4In6() && p.Bits() == IPv6Bits:
		b := a.As16()
		return b[0] == 0xfd && string(b[1:6]) == GlobalID && b[14] == 0 && b[15] == 0
	}
	return false
}

// host returns the address at offset n in subnet p.
func host(p netip.Prefix, n uint16) netip.Addr {
	a := p.Masked().Addr()
	if a.Is4() {
		b := a.As4()
		b[3] |= byte(n)
		return netip.AddrFrom4(b)
	}
	b := a.As16()
	binary.BigEndian.PutUint16(b[14:], n)
	return netip.AddrFrom16(b)
}

// Tun is the address of tun0 in subnet p (::1 or .1).
func Tun(p netip.Prefix) netip.Addr { return host(p, 1) }

// Bridge is the address of the cni0 bridge in subnet p (::2 or .2).
func Bridge(p netip.Prefix) netip.Addr { return host(p, 2) }

// Containers is the range of container addresses in subnet p:
// ::10–::ffff, or .8–.15.
func Containers(p netip.Prefix) (first, last netip.Addr) {
	if p.Addr().Is4() {
		return host(p, 8), host(p, 15)
	}
	return host(p, 0x10), host(p, 0xffff)
}

// Range is the block every node's subnet of family f lies in: 10.83.0.0/16
// or fd53:7769:726c::/48. Routing it over the virtual Ethernet reaches every
// node's containers.
func Range(f Family) netip.Prefix {
	if f == IPv4 {
		return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, GlobalID[0], 0, 0}), 16)
	}
	var a [16]byte
	a[0] = 0xfd
	copy(a[1:6], GlobalID)
	return netip.PrefixFrom(netip.AddrFrom16(a), 48)
}
