package flood

import (
	"errors"

	"burrow/l2"
	"burrow/nid"
)

// Version is the FRB format version, carried in the high nibble of the first
// byte; the low nibble is the Kind.
const Version = 1

// Kind says what an FRB carries.
type Kind uint8

const (
	// Broadcast carries an Ethernet frame to every node of the overlay,
	// each receiver forwarding only inside its bound.
	Broadcast Kind = 1
	// LeafAdvert tells an adjacent peer which leaf MACs sit behind the sender.
	LeafAdvert Kind = 2
	// Transit is a Broadcast started by a bridge that does not own the
	// frame's source: one that found no path for a unicast frame it was
	// forwarding (section 3.2.4). Receivers deliver and forward it as a
	// Broadcast but must not learn the source from it: their way back to
	// the flooding bridge is not the way to the source, and learning it
	// would turn the source's path into a loop through that bridge.
	Transit Kind = 3
)

func (k Kind) String() string {
	switch k {
	case Broadcast:
		return "broadcast"
	case LeafAdvert:
		return "leaf-advert"
	case Transit:
		return "transit"
	}
	return "unknown"
}

const (
	// BroadcastHeaderLen is the bytes a Broadcast adds in front of the frame:
	// version/kind, root, bound and hop count.
	BroadcastHeaderLen = 1 + nid.Size + nid.Size + 1

	// LeafAdvertHeaderLen is the bytes of a LeafAdvert before its MAC list:
	// version/kind, root and leaf count.
	LeafAdvertHeaderLen = 1 + nid.Size + 1

	// MaxLeaves is the most leaves one LeafAdvert carries. At 6 bytes each the
	// advert is at most 1218 bytes, which leaves room for the link's own
	// header and tag inside a 1400-byte datagram. A bridge with more leaves
	// sends several adverts.
	MaxLeaves = 200

	macLen = len(l2.MAC{})
)

// Parse errors. Parse returns them unwrapped so callers can count drops by
// reason without allocating.
var (
	ErrTruncated     = errors.New("flood: FRB truncated")
	ErrVersion       = errors.New("flood: unknown FRB version")
	ErrKind          = errors.New("flood: unknown FRB kind")
	ErrShortFrame    = errors.New("flood: broadcast frame shorter than an Ethernet header")
	ErrTooManyLeaves = errors.New("flood: leaf advert lists more than MaxLeaves leaves")
	ErrTrailing      = errors.New("flood: bytes after the leaf list")
	ErrMulticastLeaf = errors.New("flood: multicast MAC advertised as a leaf")
)

// FRB is a parsed FRB message. Its slices alias the buffer given to Parse.
type FRB struct {
	Kind Kind
	Root nid.ID // the bridge that started the broadcast or owns the leaves
	// Bound is where the receiver's share of the ring ends (broadcasts only).
	Bound nid.ID
	// Hops counts the overlay links the broadcast crossed (broadcasts only).
	Hops uint8
	// Frame is the original Ethernet frame (broadcasts only), capped at its
	// length so that appending to it cannot overwrite what follows in b.
	Frame  []byte
	leaves []byte // capped at its length so Leaf cannot read past the list
}

// NumLeaves is the number of leaf MACs in a LeafAdvert.
func (f FRB) NumLeaves() int { return len(f.leaves) / macLen }

// Leaf returns the i-th advertised leaf MAC, 0 <= i < NumLeaves().
func (f FRB) Leaf(i int) l2.MAC {
	return l2.MAC(f.leaves[i*macLen : (i+1)*macLen])
}

func versionKind(k Kind) byte { return Version<<4 | byte(k) }

// AppendBroadcast appends a Broadcast or Transit FRB carrying frame to dst. The
// initiator sends hops 1 and each forwarding node the hops it received plus
// one, so Hops at a receiver is the number of overlay links the frame
// crossed, the switching path length of experiment E7.
func AppendBroadcast(dst []byte, k Kind, root, bound nid.ID, hops uint8, frame []byte) []byte {
	if k != Transit {
		k = Broadcast
	}
	dst = append(dst, versionKind(k))
	dst = append(dst, root[:]...)
	dst = append(dst, bound[:]...)
	dst = append(dst, hops)
	return append(dst, frame...)
}

// AppendLeafAdvert appends a LeafAdvert FRB for the bridge root to dst. It
// encodes at most the first MaxLeaves of leaves; a caller with more sends the
// rest in further adverts.
func AppendLeafAdvert(dst []byte, root nid.ID, leaves []l2.MAC) []byte {
	leaves = leaves[:min(len(leaves), MaxLeaves)]
	dst = append(dst, versionKind(LeafAdvert))
	dst = append(dst, root[:]...)
	dst = append(dst, byte(len(leaves)))
	for _, mac := range leaves {
		dst = append(dst, mac[:]...)
	}
	return dst
}

// Parse decodes one FRB. It accepts only what AppendBroadcast and
// AppendLeafAdvert produce, and it does not allocate.
func Parse(b []byte) (FRB, error) {
	var f FRB
	if len(b) < 1 {
		return f, ErrTruncated
	}
	if b[0]>>4 != Version {
		return f, ErrVersion
	}
	f.Kind = Kind(b[0] & 0x0f)
	switch f.Kind {
	case Broadcast, Transit:
		if len(b) < BroadcastHeaderLen {
			return FRB{}, ErrTruncated
		}
		f.Root = nid.ID(b[1 : 1+nid.Size])
		f.Bound = nid.ID(b[1+nid.Size : 1+2*nid.Size])
		f.Hops = b[1+2*nid.Size]
		f.Frame = b[BroadcastHeaderLen:len(b):len(b)]
		if len(f.Frame) < l2.EthernetHeaderLen {
			return FRB{}, ErrShortFrame
		}
		return f, nil
	case LeafAdvert:
		if len(b) < LeafAdvertHeaderLen {
			return FRB{}, ErrTruncated
		}
		f.Root = nid.ID(b[1 : 1+nid.Size])
		n := int(b[LeafAdvertHeaderLen-1])
		if n > MaxLeaves {
			return FRB{}, ErrTooManyLeaves
		}
		end := LeafAdvertHeaderLen + n*macLen
		if len(b) < end {
			return FRB{}, ErrTruncated
		}
		if len(b) > end {
			return FRB{}, ErrTrailing
		}
		f.leaves = b[LeafAdvertHeaderLen:end:end]
		for i := range n {
			if f.Leaf(i).IsMulticast() {
				return FRB{}, ErrMulticastLeaf
			}
		}
		return f, nil
	}
	return FRB{}, ErrKind
}
