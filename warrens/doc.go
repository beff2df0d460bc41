// Package warrens gives each burrow node its own container subnet, derived
// from nothing but its machine id, as the Warrens paper does (section
// III-C, "Container Network Addressing", Fig. 4 and Table I), and claims it
// in the DHT so that two nodes never route the same subnet.
//
// # Address layout
//
// Every address is a prefix, a global identifier marking it as Warrens, a
// node identifier and a container range. The global identifier comes from
// the string "Swirl" (hex 53 77 69 72 6c); the node identifier is the
// 64-bit Fowler–Noll–Vo hash (FNV-1a; the paper names FNV-64 without the
// variant) of the machine id, the text of /etc/machine-id without its
// trailing newline.
//
// IPv6, a /112, after the unique local address structure with the subnet
// and interface fields swapped in size (2^64 nodes, 65,520 containers each):
//
//	bits   0–7    fd                   ULA prefix (fc00::/7, L=1)
//	bits   8–47   53:77:69:72:6c       global identifier, "Swirl"
//	bits  48–111  FNV-64(machine id)   node identifier
//	bits 112–127  container range      Table I below
//
// IPv4, a /28, in the only private block with 24 free bits (10.0.0.0/8):
//
//	bits   0–7    10                   private prefix
//	bits   8–15   0x53 = 83            global identifier, the first byte of "Swirl"
//	bits  16–27   FNV-64 >> 52         node identifier, 4096 subnets; the top
//	                                   bits, which FNV mixes best
//	bits  28–31   container range      16 addresses, below
//
// Host part of a subnet (Table I, IPv6; the IPv4 column scales it down):
//
//	IPv6          IPv4       use
//	::1           .1         tun0, the TUN device if one is needed
//	::2           .2         cni0, the bridge of the local containers
//	::3 – ::f     .3 – .7    reserved for future system devices
//	::10 – ::ffff .8 – .15   containers (65,520 / 8)
//
// The paper's count of eight IPv4 containers includes .15, which is the
// broadcast address of the /28 when cni0 is configured with the whole
// subnet; a runtime that needs broadcast on cni0 should stop at .14.
//
// # Collisions
//
// Hashes collide — IPv4 has only 4096 node identifiers, so tens of nodes
// already risk it, as the paper warns — so each node claims its subnet in
// the DHT before using it: key "subnet:<prefix>", value its node ID, by the
// atomic PutIfAbsent, as a lease it renews. The rule is first come, first
// served: the holder keeps the subnet as long as it renews it; a node that
// finds it held by another node hashes its machine id with a counter
// appended ("<machine id>-1", "-2", …) and tries the next candidate. Of
// simultaneous claimants exactly one wins, because the key's primary
// serializes them. The rule never renumbers a node that already runs
// containers because a newcomer hashed onto its subnet, and each node's
// sequence of candidates depends only on its machine id, so a restarted
// node gets its subnet back unless another took it after its lease ran
// out.
package warrens
