// Package overlay is the self-organizing part of burrow: the Symphony ring
// that nodes arrange themselves into (EdgeVPN paper, section 3.1). It holds
// the pure pieces the node core composes:
//
//   - Info and the control-message codec: the messages nodes exchange to
//     find their place on the ring, keep it consistent and ask for links;
//   - Ring: a node's view of its successors and predecessor, and the
//     network-size estimate derived from their spacing;
//   - NextHop, NextHopTo: greedy routing of control messages by node ID,
//     clockwise toward a key, or either way round toward one node;
//   - Builder: the desired links — s successors and k long-distance links
//     drawn from Symphony's harmonic distribution (eq. 1) with the
//     too-close rule (eq. 2).
//
// Nothing here does I/O, reads a clock or uses global randomness.
package overlay
