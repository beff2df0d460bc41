// Package netlab builds throwaway Linux network-namespace topologies on one
// machine for burrow's end-to-end tests, benchmarks and demo, starts real
// programs inside them and tears everything down again.
//
// A lab is a set of namespaces whose names start with the lab's prefix:
//
//   - <prefix>-inet holds the "internet": a bridge named <prefix>-br.
//   - Each internet host (Lab.AddHost) is a namespace with eth0 on that
//     bridge, addressed from InternetRange (198.18.0.0/16, the range RFC 2544
//     sets aside for benchmarking network devices: it is never routed on the
//     real internet, yet it is neither RFC 1918 nor carrier-grade NAT space,
//     so burrow treats it as public).
//   - Each site (Lab.AddSite) is a router namespace with wan on the internet
//     bridge and a LAN bridge named lan; its hosts (Site.AddHost) have eth0 on
//     that bridge and the router as default gateway. A NAT site's LAN is
//     10.200.<n>.0/24 (PrivateLANRange); a NoNAT site's LAN is the routed
//     public subnet 198.19.<n>.0/24 (PublicLANRange).
//   - IPv6 is opt-in, from the documentation prefix 2001:db8::/32: an
//     internet host or router given IPv6 (Host.AddIPv6) has an address from
//     InternetRange6 beside its IPv4 one; a site given IPv6 (Site.AddIPv6)
//     routes a /64 of SiteRange6 to its LAN without translation, behind its
//     router's firewall, as ISPs hand out IPv6.
//
// Every link is created directly inside a lab namespace, never in the
// namespace of the calling program, so deleting the namespaces removes every
// link. Bridge ports are named <prefix>-p<n>; the names programs see inside
// the namespaces are the conventional eth0, wan and lan. Internet hosts and
// routers have an on-link default route: traffic to addresses outside the lab
// finds no neighbour and goes nowhere, since the lab has no uplink.
//
// The lab records what it creates, and the PIDs of the processes it starts,
// in a state file under StateDir as it goes, so Cleanup and CleanupAll can
// remove what a crashed run left behind. Processes started with Host.Start
// are also killed by the kernel when the program that started them dies.
package netlab
