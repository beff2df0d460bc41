// Package runtime is the burrow daemon: it drives burrow's pure core
// (package node) with real I/O: one UDP socket shared by every link
// (batched, with GSO/GRO), the TAP device (with the virtio header and
// offloads), timers, and the local control socket. It is the only package
// that starts goroutines:
//
//   - one core goroutine owns the node.Node and handles everything the data
//     path hands up (handshakes, broadcasts, misses), timers and control
//     requests;
//   - one goroutine per TAP queue reads frames, switches, segments, seals
//     and sends them;
//   - one goroutine reads the socket, opens datagrams and writes frames to
//     the TAP, coalesced.
//
// The data-path goroutines never wait for the core: events go through a
// bounded queue and are dropped, counted, when it is full.
package runtime
