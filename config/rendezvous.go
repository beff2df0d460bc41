package config

import (
	"fmt"
	"net"
	"strconv"

	"mellium.im/xmpp/jid"
)

// Rendezvous names servers for first contact, for networks without a
// beacon. They carry no traffic and prove no membership: certificates do.
type Rendezvous struct {
	XMPP *XMPP `yaml:"xmpp"`
}

// XMPP is an XMPP server (prosody, ejabberd) with a publish-subscribe
// service, where each member keeps one card (node ID and endpoints) in a
// bounded list; a node without a link reads the list once and exchanges
// cards with a few members by direct messages.
type XMPP struct {
	// Server is host:port of the server's client port; default the JID's
	// domain at port 5222.
	Server string `yaml:"server"`
	// JID is this node's account, user@domain (a resource is added).
	JID string `yaml:"jid"`
	// Password, or PasswordFile holding it (one of them).
	Password     string `yaml:"password"`
	PasswordFile string `yaml:"password_file"`
	// CA is a PEM file of the CA that signed the server's certificate;
	// default the system's. The server must offer TLS (STARTTLS).
	CA string `yaml:"ca"`
	// PubSub is the publish-subscribe service's JID, e.g.
	// pubsub.example.org.
	PubSub string `yaml:"pubsub"`
	// Node is the publish-subscribe node of the network's cards; default
	// burrow-NETWORK.
	Node string `yaml:"node"`
	// MaxItems bounds the cards the node keeps and a joiner reads;
	// default 32.
	MaxItems int `yaml:"max_items"`
	// Contacts is how many members a joiner exchanges cards with;
	// default 3.
	Contacts int `yaml:"contacts"`

	// Derived.
	Account       jid.JID `yaml:"-"`
	PubSubService jid.JID `yaml:"-"`
}

// Defaults of XMPP.
const (
	DefaultXMPPPort     = 5222
	DefaultXMPPMaxItems = 32
	DefaultXMPPContacts = 3
)

func (c *Config) validateRendezvous() error {
	x := c.Rendezvous.XMPP
	if x == nil {
		return nil
	}
	const f = "rendezvous.xmpp."
	var err error
	if x.Account, err = jid.Parse(x.JID); err != nil || x.Account.Localpart() == "" || x.Account.Resourcepart() != "" {
		return fieldErr(f+"jid", "%q is not an account such as node1@xmpp.example.org (user@domain, no resource)", x.JID)
	}
	if x.Server == "" {
		x.Server = net.JoinHostPort(x.Account.Domainpart(), strconv.Itoa(DefaultXMPPPort))
	}
	host, port, err := net.SplitHostPort(x.Server)
	if p, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || p < 1 || p > 65535 {
		return fieldErr(f+"server", "%q is not host:port such as xmpp.example.org:5222", x.Server)
	}
	switch {
	case x.Password == "" && x.PasswordFile == "":
		return fieldErr(f+"password", "the account needs a password: give password or password_file")
	case x.Password != "" && x.PasswordFile != "":
		return fieldErr(f+"password_file", "give password or password_file, not both")
	}
	if x.PubSubService, err = jid.Parse(x.PubSub); err != nil || x.PubSub == "" || x.PubSubService.Localpart() != "" || x.PubSubService.Resourcepart() != "" {
		return fieldErr(f+"pubsub", "%q is not a publish-subscribe service such as pubsub.xmpp.example.org", x.PubSub)
	}
	if x.Node == "" {
		x.Node = "burrow-" + c.Network
	}
	if x.MaxItems == 0 {
		x.MaxItems = DefaultXMPPMaxItems
	}
	if x.MaxItems < 2 || x.MaxItems > 256 {
		return fieldErr(f+"max_items", "%d is out of range 2..256: the list a joiner reads must stay short", x.MaxItems)
	}
	if x.Contacts == 0 {
		x.Contacts = DefaultXMPPContacts
	}
	if x.Contacts < 1 || x.Contacts > 16 {
		return fieldErr(f+"contacts", "%d is out of range 1..16", x.Contacts)
	}
	if o := c.Overlay; o.Enabled != nil && !*o.Enabled {
		return fieldErr(f+"jid", "rendezvous finds a place on the ring, but overlay.enabled is false")
	}
	return nil
}

// String names the account and server, never the password.
func (x *XMPP) String() string { return fmt.Sprintf("%s at %s", x.JID, x.Server) }
