package overlay

import "burrow/nid"

// Card is what a node tells others through a rendezvous server (an XMPP
// server, for networks without a beacon): who it is and where it can be
// reached. A member publishes one; a joiner offers its own to a few
// members it read, and they answer with theirs. A card proves nothing:
// membership is proven only by the certificates in the link handshake.
type Card struct {
	Kind CardKind
	Info Info
}

// CardKind says what a card is for.
type CardKind uint8

// Card kinds.
const (
	// CardPublished is a member's card on the rendezvous server.
	CardPublished CardKind = iota + 1
	// CardOffer is a joiner's card sent to a member, asking for its own.
	CardOffer
	// CardAnswer answers an offer.
	CardAnswer
	maxCardKind
)

// cardVersion leads every encoded card.
const cardVersion = 1

// Append encodes the card after dst.
func (c Card) Append(dst []byte) []byte {
	dst = append(dst, cardVersion, byte(c.Kind))
	return appendInfo(dst, c.Info)
}

// ParseCard decodes a card, rejecting anything that is not exactly one.
func ParseCard(b []byte) (Card, error) {
	var c Card
	if len(b) < 2 {
		return c, ErrTruncated
	}
	if b[0] != cardVersion {
		return c, ErrVersion
	}
	c.Kind = CardKind(b[1])
	if c.Kind == 0 || c.Kind >= maxCardKind {
		return c, ErrType
	}
	r := reader{b: b[2:]}
	c.Info = r.info()
	switch {
	case r.err != nil:
		return c, r.err
	case len(r.b) != 0:
		return c, ErrTrailing
	case c.Info.ID == nid.ID{} || len(c.Info.Endpoints) == 0:
		return c, ErrField // a card that names no one, or nowhere, is of no use
	}
	return c, nil
}
