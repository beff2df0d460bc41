package runtime

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"mellium.im/sasl"
	"mellium.im/xmlstream"
	"mellium.im/xmpp"
	"mellium.im/xmpp/form"
	"mellium.im/xmpp/jid"
	"mellium.im/xmpp/ping"
	"mellium.im/xmpp/pubsub"
	"mellium.im/xmpp/stanza"

	"burrow/config"
	"burrow/node"
	"burrow/overlay"
)

// cardNS names the element that carries a card, in a published item and
// in a message.
const cardNS = "urn:burrow:rendezvous:1"

// cardElement is a card on XMPP: base64 of overlay.Card, and in a
// published item the member's full JID, where it takes offers.
type cardElement struct {
	XMLName xml.Name `xml:"urn:burrow:rendezvous:1 card"`
	JID     string   `xml:"jid,attr,omitempty"`
	Data    string   `xml:",chardata"`
}

type cardMessage struct {
	stanza.Message
	Card *cardElement `xml:"urn:burrow:rendezvous:1 card"`
}

// maxCardText bounds a card element's text: a card of MaxEndpoints IPv6
// endpoints and MaxRelays relays is well under it.
const maxCardText = 1024

// decodeCard decodes a card element's text, rejecting what is not one.
func decodeCard(text string) (overlay.Card, error) {
	if len(text) > maxCardText {
		return overlay.Card{}, errors.New("card too long")
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(text))
	if err != nil {
		return overlay.Card{}, fmt.Errorf("card is not base64: %w", err)
	}
	return overlay.ParseCard(raw)
}

func encodeCard(c overlay.Card) string { return base64.StdEncoding.EncodeToString(c.Append(nil)) }

// Reconnection backoff of the XMPP client.
const (
	xmppRetryFirst = time.Second
	xmppRetryMax   = time.Minute
	xmppTimeout    = 10 * time.Second
	xmppPingEvery  = 30 * time.Second
	// xmppQueue bounds the core's requests waiting for the server.
	xmppQueue = 64
)

// xmppRendezvous is the client of the network's XMPP server: it keeps a
// session, with backoff while the server is away, and carries the core's
// requests (publish, read, send a card) to it and cards back. Links never
// depend on it.
type xmppRendezvous struct {
	cfg      *config.XMPP
	password string
	tls      *tls.Config
	log      *slog.Logger
	requests chan func(context.Context, *xmpp.Session) error
	ctx      context.Context // the daemon's, set by run

	mu     sync.Mutex
	status XMPPStatus
}

// XMPPStatus is the XMPP client's state, for `burrow status`.
type XMPPStatus struct {
	Server     string    `json:"server"`
	JID        string    `json:"jid"`
	Node       string    `json:"node"`
	Connected  bool      `json:"connected"`
	Since      time.Time `json:"since,omitzero"`
	LastError  string    `json:"last_error,omitempty"`
	Reconnects uint64    `json:"reconnects"`
}

// newXMPPRendezvous reads the password and the CA the configuration names;
// errors name the field.
func newXMPPRendezvous(cfg *config.XMPP, log *slog.Logger) (*xmppRendezvous, error) {
	x := &xmppRendezvous{cfg: cfg, password: cfg.Password, log: log.With("xmpp", cfg.JID),
		requests: make(chan func(context.Context, *xmpp.Session) error, xmppQueue),
		status:   XMPPStatus{Server: cfg.Server, JID: cfg.JID, Node: cfg.Node}}
	if cfg.PasswordFile != "" {
		b, err := os.ReadFile(cfg.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("rendezvous.xmpp.password_file: %w", err)
		}
		if x.password = strings.TrimSpace(string(b)); x.password == "" {
			return nil, fmt.Errorf("rendezvous.xmpp.password_file: %s is empty", cfg.PasswordFile)
		}
	}
	x.tls = &tls.Config{ServerName: cfg.Account.Domainpart(), MinVersion: tls.VersionTLS12}
	if cfg.CA != "" {
		pem, err := os.ReadFile(cfg.CA)
		if err != nil {
			return nil, fmt.Errorf("rendezvous.xmpp.ca: %w", err)
		}
		x.tls.RootCAs = x509.NewCertPool()
		if !x.tls.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("rendezvous.xmpp.ca: %s holds no PEM certificate", cfg.CA)
		}
	}
	return x, nil
}

func (x *xmppRendezvous) Status() XMPPStatus {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.status
}

func (x *xmppRendezvous) setConnected(up bool, err error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if up {
		if !x.status.Since.IsZero() {
			x.status.Reconnects++
		}
		x.status.Since = time.Now()
	}
	x.status.Connected = up
	if err != nil {
		x.status.LastError = err.Error()
	}
}

// run keeps a session until ctx ends; the core hears of every change.
func (x *xmppRendezvous) run(ctx context.Context, d *Daemon) {
	x.ctx = ctx
	retry := xmppRetryFirst
	for ctx.Err() == nil {
		s, err := x.connect(ctx)
		if err != nil {
			x.setConnected(false, err)
			x.log.Warn("XMPP rendezvous: cannot connect (links that are up stay up); retrying",
				"server", x.cfg.Server, "err", err, "retry_in", retry)
			select {
			case <-ctx.Done():
				return
			case <-time.After(retry):
			}
			retry = min(2*retry, xmppRetryMax)
			continue
		}
		retry = xmppRetryFirst
		// What the core asked for while the server was away is stale:
		// told the server is back, it publishes and reads afresh.
		for len(x.requests) > 0 {
			<-x.requests
		}
		x.setConnected(true, nil)
		x.log.Info("XMPP rendezvous connected", "server", x.cfg.Server, "as", s.LocalAddr(), "pubsub", x.cfg.PubSub, "node", x.cfg.Node)
		d.toCore(ctx, func() { d.node.RendezvousUp(true, time.Now()) })
		err = x.serve(ctx, s, d)
		x.setConnected(false, err)
		d.toCore(ctx, func() { d.node.RendezvousUp(false, time.Now()) })
		if ctx.Err() == nil {
			x.log.Warn("XMPP rendezvous lost (links that are up stay up); reconnecting", "server", x.cfg.Server, "err", err)
		}
	}
}

// connect opens a session: TCP, STARTTLS, SASL, a resource.
func (x *xmppRendezvous) connect(ctx context.Context) (*xmpp.Session, error) {
	ctx, cancel := context.WithTimeout(ctx, xmppTimeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", x.cfg.Server)
	if err != nil {
		return nil, fmt.Errorf("server %s (rendezvous.xmpp.server): %w", x.cfg.Server, err)
	}
	s, err := xmpp.NewClientSession(ctx, x.cfg.Account, conn,
		xmpp.StartTLS(x.tls),
		xmpp.SASL("", x.password, sasl.ScramSha256, sasl.ScramSha1, sasl.Plain),
		xmpp.BindResource())
	if err != nil {
		conn.Close()
		hint := "check rendezvous.xmpp.jid and its password"
		var unknownCA x509.UnknownAuthorityError
		var badCert *tls.CertificateVerificationError
		if errors.As(err, &unknownCA) || errors.As(err, &badCert) {
			hint = "the server's certificate is not trusted: check rendezvous.xmpp.ca, and that the JID's domain is a name of the certificate"
		}
		return nil, fmt.Errorf("session as %s with %s: %w (%s)", x.cfg.JID, x.cfg.Server, err, hint)
	}
	// Available to the server only: the roster is not used, so this
	// presence goes to no one.
	if err := s.Send(ctx, stanza.Presence{}.Wrap(nil)); err != nil {
		s.Close()
		conn.Close()
		return nil, err
	}
	return s, nil
}

// serve handles incoming cards and the core's requests until the session
// ends or ctx does.
func (x *xmppRendezvous) serve(ctx context.Context, s *xmpp.Session, d *Daemon) error {
	served := make(chan error, 1)
	go func() {
		served <- s.Serve(x.cardHandler(func(from string, card overlay.Card) {
			d.toCore(ctx, func() { d.node.RendezvousCard(from, card, time.Now()) })
		}))
	}()
	defer s.Conn().Close()
	alive := time.NewTicker(xmppPingEvery)
	defer alive.Stop()
	for {
		select {
		case <-alive.C:
			// A server that vanished without closing the stream is
			// noticed here, not when the next joiner needs it.
			pctx, cancel := context.WithTimeout(ctx, xmppTimeout)
			err := ping.Send(pctx, s, x.cfg.Account.Domain())
			cancel()
			var se stanza.Error
			if err != nil && !errors.As(err, &se) {
				return fmt.Errorf("the server stopped answering pings: %w", err)
			}
		case <-ctx.Done():
			// The card stays on the list (prosody lets no member retract
			// items): newer cards push it out, and a joiner that picks a
			// member that is gone tries the others.
			s.Close()
			return ctx.Err()
		case err := <-served:
			if err == nil {
				err = errors.New("the server closed the stream")
			}
			return err
		case req := <-x.requests:
			rctx, cancel := context.WithTimeout(ctx, xmppTimeout)
			err := req(rctx, s)
			cancel()
			if err != nil {
				x.log.Warn("XMPP rendezvous request failed", "err", err)
				var se stanza.Error
				if !errors.As(err, &se) {
					return err // the stream broke: reconnect
				}
			}
		}
	}
}

// cardHandler hands the cards in messages to deliver; anything else is
// ignored.
func (x *xmppRendezvous) cardHandler(deliver func(from string, card overlay.Card)) xmpp.Handler {
	return xmpp.HandlerFunc(func(t xmlstream.TokenReadEncoder, start *xml.StartElement) error {
		if start.Name.Local != "message" {
			return nil
		}
		var m cardMessage
		if err := xml.NewTokenDecoder(xmlstream.MultiReader(xmlstream.Token(*start), t)).Decode(&m); err != nil || m.Card == nil {
			return nil
		}
		card, err := decodeCard(m.Card.Data)
		if err != nil || card.Kind == overlay.CardPublished {
			x.log.Debug("XMPP rendezvous: bad card ignored", "from", m.From, "err", err)
			return nil
		}
		deliver(m.From.String(), card)
		return nil
	})
}

// request queues work for the session without blocking the core.
func (x *xmppRendezvous) request(what string, f func(context.Context, *xmpp.Session) error) {
	select {
	case x.requests <- f:
	default:
		x.log.Warn("XMPP rendezvous: too many requests waiting for the server; dropped one", "request", what)
	}
}

// publish puts this node's card on the list, creating the list (bounded,
// open to every account for publishing) when it does not exist yet.
func (x *xmppRendezvous) publish(card overlay.Card) {
	x.request("publish", func(ctx context.Context, s *xmpp.Session) error {
		item := func() xml.TokenReader {
			return xmlstream.Wrap(xmlstream.Token(xml.CharData(encodeCard(card))),
				xml.StartElement{Name: xml.Name{Space: cardNS, Local: "card"}, Attr: []xml.Attr{{Name: xml.Name{Local: "jid"}, Value: s.LocalAddr().String()}}})
		}
		_, err := pubsub.PublishIQ(ctx, s, stanza.IQ{To: x.cfg.PubSubService}, x.cfg.Node, card.Info.ID.String(), item())
		// A server that refuses the publication may not have the node:
		// servers that let accounts create nodes get it created here.
		if !isCondition(err, stanza.ItemNotFound) && !isCondition(err, stanza.Forbidden) {
			return err
		}
		if cerr := x.createNode(ctx, s); cerr != nil {
			return fmt.Errorf("publishing on node %s of %s (rendezvous.xmpp.node, pubsub): %w; creating it: %w (if it does not exist, have an admin of the server create it once: burrow xmpp create-node)", x.cfg.Node, x.cfg.PubSub, err, cerr)
		}
		x.log.Info("XMPP rendezvous: created the list of cards", "pubsub", x.cfg.PubSub, "node", x.cfg.Node, "max_items", x.cfg.MaxItems)
		_, err = pubsub.PublishIQ(ctx, s, stanza.IQ{To: x.cfg.PubSubService}, x.cfg.Node, card.Info.ID.String(), item())
		return err
	})
}

// createNode creates the network's list of cards: at most max_items,
// open to every account of the server for reading and publishing.
func (x *xmppRendezvous) createNode(ctx context.Context, s *xmpp.Session) error {
	cfg := form.New(
		form.Hidden("FORM_TYPE", form.Value("http://jabber.org/protocol/pubsub#node_config")),
		form.Text("pubsub#max_items", form.Value(fmt.Sprint(x.cfg.MaxItems))),
		form.List("pubsub#publish_model", form.Value("open")),
		form.List("pubsub#access_model", form.Value("open")),
	)
	return pubsub.CreateNodeIQ(ctx, s, stanza.IQ{To: x.cfg.PubSubService}, x.cfg.Node, cfg)
}

// ErrNodeExists is what CreateXMPPNode returns when the node is there.
var ErrNodeExists = errors.New("the node exists already")

// CreateXMPPNode creates the network's list of cards on the XMPP server,
// logged in as the account of cfg (an admin of the server where only
// admins create nodes, as on prosody).
func CreateXMPPNode(ctx context.Context, cfg *config.XMPP, log *slog.Logger) error {
	x, err := newXMPPRendezvous(cfg, log)
	if err != nil {
		return err
	}
	s, err := x.connect(ctx)
	if err != nil {
		return err
	}
	defer s.Conn().Close()
	defer s.Close()
	go s.Serve(nil)
	err = x.createNode(ctx, s)
	if isCondition(err, stanza.Conflict) {
		return ErrNodeExists
	}
	if err != nil {
		return fmt.Errorf("creating node %s on %s (rendezvous.xmpp.node, pubsub): %w", cfg.Node, cfg.PubSub, err)
	}
	return nil
}

// fetch reads at most max_items cards and hands them to the core; it
// always answers, with no cards when the read failed.
func (x *xmppRendezvous) fetch(d *Daemon) {
	x.request("fetch", func(ctx context.Context, s *xmpp.Session) error {
		members, err := x.readCards(ctx, s)
		d.toCore(x.ctx, func() { d.node.RendezvousCards(members, time.Now()) })
		if isCondition(err, stanza.ItemNotFound) {
			return nil // no member published yet
		}
		return err
	})
}

func (x *xmppRendezvous) readCards(ctx context.Context, s *xmpp.Session) ([]node.RendezvousMember, error) {
	iter := pubsub.FetchIQ(ctx, stanza.IQ{To: x.cfg.PubSubService}, s, pubsub.Query{Node: x.cfg.Node, MaxItems: uint64(x.cfg.MaxItems)})
	defer iter.Close()
	var members []node.RendezvousMember
	for iter.Next() && len(members) < x.cfg.MaxItems {
		_, r := iter.Item()
		if r == nil {
			continue
		}
		var el cardElement
		if err := xml.NewTokenDecoder(r).Decode(&el); err != nil {
			continue
		}
		card, err := decodeCard(el.Data)
		at, jerr := jid.Parse(el.JID)
		if err != nil || jerr != nil || card.Kind != overlay.CardPublished {
			x.log.Debug("XMPP rendezvous: bad card on the list ignored", "jid", el.JID, "err", errors.Join(err, jerr))
			continue
		}
		members = append(members, node.RendezvousMember{Address: at.String(), Card: card})
	}
	return members, iter.Err()
}

// send sends a card to one member in a message.
func (x *xmppRendezvous) send(to string, card overlay.Card) {
	x.request("send", func(ctx context.Context, s *xmpp.Session) error {
		j, err := jid.Parse(to)
		if err != nil {
			return nil
		}
		return s.Encode(ctx, cardMessage{Message: stanza.Message{To: j, Type: stanza.NormalMessage}, Card: &cardElement{Data: encodeCard(card)}})
	})
}

func isCondition(err error, c stanza.Condition) bool {
	var se stanza.Error
	return errors.As(err, &se) && se.Condition == c
}

// toCore runs f on the core goroutine without waiting for it, unless the
// daemon is stopping.
func (d *Daemon) toCore(ctx context.Context, f func()) {
	select {
	case d.calls <- f:
	case <-ctx.Done():
	case <-d.done:
	}
}

// The core's rendezvous actions go to the XMPP client; they never block.

func (o *coreOutput) PublishCard(card overlay.Card) {
	if o.xmpp != nil {
		o.xmpp.publish(card)
	}
}

func (o *coreOutput) FetchCards() {
	if o.xmpp != nil {
		o.xmpp.fetch((*Daemon)(o))
	}
}

func (o *coreOutput) SendCard(to string, card overlay.Card) {
	if o.xmpp != nil {
		o.xmpp.send(to, card)
	}
}
