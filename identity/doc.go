// Package identity holds burrow's membership credentials: each node's static
// X25519 key (from which its ring ID derives), a network's Ed25519
// certificate authority, and the compact certificates the CA signs to admit a
// node into the network.
//
// Encoding, signing and verification are pure: time and randomness are
// parameters. Reading and writing key and certificate files lives apart, in
// files.go.
package identity
