package kernelpath

import (
	"bytes"
	"testing"
)

// FuzzParseAnswer: the probe decoder reads whatever arrives at the probe
// socket from anyone. It must never panic, and what it takes for an
// answer must be exactly what a peer's kernel makes of this node's
// question with that nonce — kind 1 turned to 2, balance 1 to 0 — apart
// from the reserved byte, which it ignores. The seed corpus in
// testdata/fuzz/FuzzParseAnswer holds an answer, a question, a truncated
// answer, an answer with a byte too many and garbage.
func FuzzParseAnswer(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		nonce, ok := ParseAnswer(b)
		if !ok {
			if nonce != 0 {
				t.Fatalf("% x: refused, yet nonce %#x", b, nonce)
			}
			return
		}
		want := answerTo(nonce)
		want[6] = b[6]
		if !bytes.Equal(b, want) {
			t.Fatalf("% x parsed as the answer with nonce %#x, which is % x", b, nonce, want)
		}
		if again, ok := ParseAnswer(answerTo(nonce)); !ok || again != nonce {
			t.Fatalf("the answer with nonce %#x parsed as %#x, %v", nonce, again, ok)
		}
	})
}

// answerTo is what a peer's kernel path sends back for this node's
// question with nonce.
func answerTo(nonce uint64) []byte {
	b := AppendProbe(nil, nonce)
	b[5], b[7] = probeAnswer, 0
	return b
}
