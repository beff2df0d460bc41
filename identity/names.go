package identity

import "fmt"

// Name limits. They bound the certificate encoding, where each string carries
// a one-byte length.
const (
	MaxNetworkNameLen = 64
	MaxNodeNameLen    = 64
	MaxGroupNameLen   = 32
)

// CheckNetworkName reports whether s can name a network: 1-64 characters of
// a-z, 0-9, '.' and '-'.
func CheckNetworkName(s string) error {
	if !validName(s, MaxNetworkNameLen, false) {
		return fmt.Errorf("network name %q is invalid: use 1-%d characters of a-z, 0-9, '.' and '-'", s, MaxNetworkNameLen)
	}
	return nil
}

// CheckNodeName reports whether s can name a node: 1-64 characters of
// A-Z, a-z, 0-9, '.', '_' and '-'.
func CheckNodeName(s string) error {
	if !validName(s, MaxNodeNameLen, true) {
		return fmt.Errorf("node name %q is invalid: use 1-%d characters of A-Z, a-z, 0-9, '.', '_' and '-'", s, MaxNodeNameLen)
	}
	return nil
}

// CheckGroupName reports whether s can name a group: 1-32 characters of
// A-Z, a-z, 0-9, '.', '_' and '-'.
func CheckGroupName(s string) error {
	if !validName(s, MaxGroupNameLen, true) {
		return fmt.Errorf("group name %q is invalid: use 1-%d characters of A-Z, a-z, 0-9, '.', '_' and '-'", s, MaxGroupNameLen)
	}
	return nil
}

// validName accepts 1..maxLen of [a-z0-9.-], plus upper case and '_' when
// mixed is set.
func validName(s string, maxLen int, mixed bool) bool {
	if len(s) == 0 || len(s) > maxLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '.', c == '-':
		case mixed && ('A' <= c && c <= 'Z' || c == '_'):
		default:
			return false
		}
	}
	return true
}
