// Package nat holds the pure parts of reaching nodes behind NATs: STUN
// binding requests and answers (RFC 8489, with pion/stun for the format),
// and a prober that learns this node's server-reflexive addresses from
// several STUN servers and tells what kind of mapping its NAT does.
//
// It is the endpoint discovery of the EdgeVPN seed's NAT traversal
// (section 3.3: STUN to discover endpoints, TURN to relay). The rest lives
// with its state or its sockets: candidates, hole punching and relaying
// through a member or a beacon in package node (the beacon plays the part
// of the Stack4Things cloud, section 3.2), the TURN client in runtime/turnc,
// and WebSocket links for networks that block UDP in runtime/wsock.
package nat
