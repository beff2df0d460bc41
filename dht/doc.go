// Package dht is burrow's key/value store over the Symphony ring: the
// distributed hash table the IPOP paper builds its self-configuration on
// (section 3: "a machine attempts to perform an atomic write where the DHT
// key is the namespace and requested IP address"; section 4: DHCP and the
// virtual DNS store their state in it). DHCP leases, DNS names and Warrens
// container subnets live here.
//
// # Placement
//
// A key's position is the first 16 bytes of SHA-256 of the key string,
// read as a ring ID (Position). The key lives at the successor of its
// position — the first node clockwise whose ID is ≥ the position, called
// its primary — and is copied to the primary's next r−1 successors
// (replicas; r is Config.Replicas, default 3). A node is primary for the
// arc (predecessor, self].
//
// # Operations and consistency
//
// Every operation travels to the key's primary, which runs the operations
// on one key one at a time, in arrival order:
//
//   - Get returns the live record, or NotFound.
//   - PutIfAbsent creates the record when no live one exists; otherwise it
//     answers Exists with the current value and owner. Because the primary
//     serializes, exactly one of concurrent writers wins.
//   - Put creates or overwrites; overwriting needs the caller to own it.
//   - Delete and Renew need the caller to own the record.
//
// The owner is the node ID of the writer. Every record is a lease: it dies
// after its TTL unless its owner renews it.
//
// A write is acknowledged only once every replica the primary currently
// has (up to r−1 successors) stored it, so an acknowledged write survives
// the silent failure of fewer than r adjacent nodes. An answer read from
// the primary's copy (Get, Exists, Denied, NotFound) is likewise given only
// after the replicas confirmed they know nothing newer: a node that has
// just become primary may not yet have heard of a write its predecessor in
// that role accepted. So every operation costs one round trip from the
// primary to its replicas. Timeout means the outcome is unknown: a write
// may or may not have happened. Retries of one request are recognised: a
// PutIfAbsent by the same owner with the same value answers OK again, and
// other writes are answered from a short per-request cache.
//
// Leases are conservative: lifetimes travel as remaining durations, so a
// copy received later lives a little longer than its source, and the
// Expires a client gets is measured from the moment it sent its request.
// No node therefore frees a key before its owner believes the lease ended.
//
// # Versions and conflicts
//
// Each write carries a version (a hybrid logical clock: milliseconds
// shifted left 16 bits, bumped past anything seen) and the version it
// replaces. A replica stores a write only when it knows nothing newer than
// what the write replaces; otherwise it answers with its own copy, and the
// primary adopts that copy, re-replicates it under a fresh version and runs
// the operation again. That is how a primary that missed an acknowledged
// write (a node that just joined, or a stale view) learns it before it can
// hand the key to someone else. Copies that arrive any other way (sync,
// digest, handoff) are merged newest-version-wins, ties broken by content,
// so all copies converge.
//
// # Replicas moving with the ring
//
//   - RingChanged: when the arc a node is primary for grows (its
//     predecessor failed or left, or it just joined), it pulls the gained
//     arc from its r successors and holds operations on those keys until
//     they answered or SyncTimeout passed. A new successor gets a digest at
//     once.
//   - The pull is also a handoff: the old primary of a newcomer's arc
//     learns of the newcomer from its request, before its own view shows
//     it, and from then on sends requests for that arc to the newcomer
//     instead of serving them, so that two nodes do not act as primary
//     for one key at once. The version check above covers what remains
//     (a lost request, views that disagree for other reasons).
//   - Every RefreshInterval a primary sends each replica a digest of
//     (position, version) for its arc; the replica asks for what it lacks
//     and pushes back what it has newer.
//   - Copies a node is no longer refreshed for are dropped after
//     StaleAfter; dead records and tombstones after Grace.
//   - Leave hands the node's arc to its successor before it goes.
//
// # Driving it
//
// A Participant does no I/O, starts no goroutines and reads no clock: the
// node hands it messages (HandleMessage), time (Tick at NextDeadline) and
// ring changes (RingChanged), and it sends through Env. Callbacks run
// inside some call into the participant — possibly before the call that
// issued the operation returns — never concurrently.
package dht
