package identity

import (
	"bytes"
	"encoding/pem"
	"fmt"
)

// decodePEM returns the contents of the single PEM block of the given type
// that data must consist of; headers and trailing text are refused so that a
// file holds exactly one thing.
func decodePEM(data []byte, blockType string) ([]byte, error) {
	block, rest := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("%w: no PEM block, want %q", ErrMalformed, blockType)
	}
	if block.Type != blockType {
		return nil, fmt.Errorf("%w: PEM block is %q, want %q", ErrMalformed, block.Type, blockType)
	}
	if len(block.Headers) != 0 {
		return nil, fmt.Errorf("%w: unexpected PEM headers in %q", ErrMalformed, blockType)
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, fmt.Errorf("%w: unexpected data after %q", ErrMalformed, blockType)
	}
	return block.Bytes, nil
}
