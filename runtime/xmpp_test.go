package runtime

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"burrow/config"
	"burrow/nid"
	"burrow/overlay"
)

// xmppConfig is a valid rendezvous section from YAML, as Load makes it.
func xmppConfig(t *testing.T, xmpp string) *config.XMPP {
	t.Helper()
	c, err := config.Parse([]byte("network: demo\nca: ca.crt\ncert: node.crt\nrendezvous: {xmpp: {" + xmpp + "}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	return c.Rendezvous.XMPP
}

// TestXMPPSettingsErrorsNameTheField: files the section names that cannot
// be used stop the daemon with an error naming the field, and a server
// that does not answer is named in the error the client logs.
func TestXMPPSettingsErrorsNameTheField(t *testing.T) {
	dir := t.TempDir()
	empty, notPEM := filepath.Join(dir, "empty"), filepath.Join(dir, "ca.txt")
	os.WriteFile(empty, []byte("\n"), 0o600)
	os.WriteFile(notPEM, []byte("not a certificate"), 0o600)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for section, field := range map[string]string{
		"jid: a@x.org, pubsub: pubsub.x.org, password_file: " + filepath.Join(dir, "missing"): "rendezvous.xmpp.password_file",
		"jid: a@x.org, pubsub: pubsub.x.org, password_file: " + empty:                         "rendezvous.xmpp.password_file",
		"jid: a@x.org, pubsub: pubsub.x.org, password: p, ca: " + filepath.Join(dir, "none"):  "rendezvous.xmpp.ca",
		"jid: a@x.org, pubsub: pubsub.x.org, password: p, ca: " + notPEM:                      "rendezvous.xmpp.ca",
	} {
		_, err := newXMPPRendezvous(xmppConfig(t, section), log)
		if err == nil || !strings.HasPrefix(err.Error(), field+": ") {
			t.Errorf("%s: error %v, want one naming %s", section, err, field)
		}
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	x, err := newXMPPRendezvous(xmppConfig(t, "jid: a@x.org, pubsub: pubsub.x.org, password: p, server: \""+closed+"\""), log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := x.connect(ctx); err == nil || !strings.Contains(err.Error(), "rendezvous.xmpp.server") || !strings.Contains(err.Error(), closed) {
		t.Errorf("connecting to a closed port: %v, want an error naming the server and rendezvous.xmpp.server", err)
	}
}

// FuzzDecodeCard: the text of a card element from the XMPP server is
// decoded without panicking, and what decodes is a card that encodes back
// to the same bytes.
func FuzzDecodeCard(f *testing.F) {
	card := overlay.Card{Kind: overlay.CardOffer, Info: overlay.Info{ID: nid.ID{1}, Endpoints: []netip.AddrPort{netip.MustParseAddrPort("198.51.100.1:51820")}}}
	f.Add(encodeCard(card))
	f.Add(" " + encodeCard(card) + "\n")
	f.Add("not base64")
	f.Fuzz(func(t *testing.T, text string) {
		c, err := decodeCard(text)
		if err != nil {
			return
		}
		again, err := decodeCard(encodeCard(c))
		if err != nil || encodeCard(again) != encodeCard(c) {
			t.Fatalf("%q decoded to %+v, which does not survive encoding: %v", text, c, err)
		}
	})
}
