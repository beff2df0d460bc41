// Package flood implements Bounded Flood, burrow's loop-free broadcast over
// the ring overlay, as the EdgeVPN seed defines it (section 3.2): the FRB
// (Flood Route and Bound) wire format (3.2.2), the flooding-bound algorithm
// (3.2.3) that tells each node which adjacent peers to forward a broadcast
// to and how far along the ring each may carry it, and the learning table
// (3.2.1) that maps leaf MAC addresses to the port and root bridge they were
// seen behind.
//
// The package does no I/O and keeps no clock: callers pass the time in.
package flood
