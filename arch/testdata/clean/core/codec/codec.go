// Package codec is imported by core from within the same entry.
package codec

import "net/netip"

// Addr is an address.
var Addr = netip.MustParseAddr("192.0.2.1")
