// Package l2 parses and builds the Ethernet-level things burrow switches:
// MAC addresses, Ethernet headers, ARP packets (which a node answers on its
// TAP for hosts elsewhere on the virtual Ethernet, as the IPOP seed's
// virtual router does, section 4.2), virtio-net offload headers, and the
// segmentation and coalescing of TCP/UDP super-frames that the TAP device
// hands over when offloads are on.
package l2
