package identity

import (
	"bytes"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"testing"
	"testing/iotest"

	"burrow/nid"
)

func TestNodeKeyDerivesRFC7748PublicKey(t *testing.T) {
	// Alice's key pair from RFC 7748 section 6.1.
	private, _ := hex.DecodeString("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")
	wantPublic, _ := hex.DecodeString("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")
	key, err := nodeKeyFromPrivate([32]byte(private))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(key.Public[:], wantPublic) {
		t.Fatalf("public key %x, want %x", key.Public, wantPublic)
	}
	if key.ID() != nid.FromPublicKey(key.Public) {
		t.Fatal("ID is not derived from the public key")
	}
}

func TestGenerateNodeKeyClamps(t *testing.T) {
	for _, fill := range []byte{0x00, 0xff} {
		key, err := GenerateNodeKey(bytes.NewReader(bytes.Repeat([]byte{fill}, 32)))
		if err != nil {
			t.Fatal(err)
		}
		if key.Private[0]&7 != 0 || key.Private[31]&0x80 != 0 || key.Private[31]&0x40 == 0 {
			t.Errorf("from 0x%02x bytes: private key %x is not clamped", fill, key.Private)
		}
		if key.Private[1] != fill {
			t.Errorf("from 0x%02x bytes: clamping touched the middle bytes: %x", fill, key.Private)
		}
	}
}

func TestGenerateNodeKeyUsesTheGivenRandomness(t *testing.T) {
	a, _ := GenerateNodeKey(seededRand(1))
	b, _ := GenerateNodeKey(seededRand(1))
	c, _ := GenerateNodeKey(seededRand(2))
	if a != b {
		t.Error("the same random stream gave different keys")
	}
	if a == c {
		t.Error("different random streams gave the same key")
	}
	if _, err := GenerateNodeKey(iotest.ErrReader(errors.New("no entropy"))); err == nil {
		t.Error("a failing random source was not reported")
	}
}

func TestDecodeNodeKey(t *testing.T) {
	key, _ := GenerateNodeKey(seededRand(3))
	back, err := decodeNodeKey(encodeNodeKey(key))
	if err != nil || back != key {
		t.Fatalf("decode(encode(key)) = %v, %v", back, err)
	}
	bad := map[string][]byte{
		"empty":      nil,
		"not PEM":    []byte("hello"),
		"wrong type": pem.EncodeToMemory(&pem.Block{Type: caKeyPEMType, Bytes: key.Private[:]}),
		"short":      pem.EncodeToMemory(&pem.Block{Type: nodeKeyPEMType, Bytes: key.Private[:31]}),
		"headers":    pem.EncodeToMemory(&pem.Block{Type: nodeKeyPEMType, Headers: map[string]string{"a": "b"}, Bytes: key.Private[:]}),
		"trailing":   append(encodeNodeKey(key), "junk"...),
		"two blocks": append(encodeNodeKey(key), encodeNodeKey(key)...),
	}
	for name, data := range bad {
		if _, err := decodeNodeKey(data); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: got %v, want ErrMalformed", name, err)
		}
	}
}
