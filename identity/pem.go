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
	raw, rest, err := nextPEM(data, blockType)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, fmt.Errorf("%w: unexpected data after %q", ErrMalformed, blockType)
	}
	return raw, nil
}

// nextPEM returns the contents of the first PEM block in data, which must be
// of the given type and without headers, and what follows it.
func nextPEM(data []byte, blockType string) (raw, rest []byte, err error) {
	block, rest := pem.Decode(data)
	switch {
	case block == nil:
		return nil, nil, fmt.Errorf("%w: no PEM block, want %q", ErrMalformed, blockType)
	case block.Type != blockType:
		return nil, nil, fmt.Errorf("%w: PEM block is %q, want %q", ErrMalformed, block.Type, blockType)
	case len(block.Headers) != 0:
		return nil, nil, fmt.Errorf("%w: unexpected PEM headers in %q", ErrMalformed, blockType)
	}
	return block.Bytes, rest, nil
}
