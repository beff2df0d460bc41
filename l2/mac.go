package l2

import (
	"fmt"
	"net"
)

// MAC is an Ethernet hardware address.
type MAC [6]byte

// Broadcast is ff:ff:ff:ff:ff:ff.
var Broadcast = MAC{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// IsMulticast reports whether the group bit is set; broadcast is multicast too.
func (m MAC) IsMulticast() bool { return m[0]&1 == 1 }

// IsBroadcast reports whether m is ff:ff:ff:ff:ff:ff.
func (m MAC) IsBroadcast() bool { return m == Broadcast }

func (m MAC) String() string { return net.HardwareAddr(m[:]).String() }

// ParseMAC reads the colon-separated form written by String.
func ParseMAC(s string) (MAC, error) {
	var m MAC
	hw, err := net.ParseMAC(s)
	if err != nil || len(hw) != len(m) {
		return m, fmt.Errorf("l2: %q is not a 6-byte MAC address", s)
	}
	copy(m[:], hw)
	return m, nil
}
