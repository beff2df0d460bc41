package turnc

import (
	"errors"
	"fmt"

	"github.com/pion/stun/v4"
)

var (
	// ErrClosed is returned by calls on a closed Client.
	ErrClosed = errors.New("turnc: client closed")
	// ErrNotBound is returned by Send when the peer's channel is still being
	// bound and its short waiting queue is full: the datagram was dropped.
	ErrNotBound = errors.New("turnc: channel to peer not bound yet, datagram dropped")
	// ErrTooManyPeers is returned by Send when every channel number of the
	// allocation is taken.
	ErrTooManyPeers = errors.New("turnc: no channel number left for another peer")
	// ErrTooLarge is returned by Send for a datagram a ChannelData message
	// inside one UDP datagram cannot carry.
	ErrTooLarge = errors.New("turnc: datagram too large for the relay")
)

// ServerError is an error response from the TURN server.
type ServerError struct {
	// Method is the request that was refused.
	Method stun.Method
	// Code and Reason are the server's ERROR-CODE attribute.
	Code   stun.ErrorCode
	Reason string
}

func (e *ServerError) Error() string {
	msg := fmt.Sprintf("turnc: %v refused: %d %s", e.Method, int(e.Code), e.Reason)
	switch e.Code {
	case stun.CodeUnauthorized, stun.CodeWrongCredentials:
		msg += " (check username, password and realm)"
	case stun.CodeAllocQuotaReached:
		msg += " (the user has too many allocations on this server)"
	}
	return msg
}
