package runtime

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"burrow/dht"
	"burrow/nid"
	"burrow/node"
	"burrow/runtime/publish"
)

// Status is what `burrow status` shows: the core's view plus the local
// devices.
type Status struct {
	Name    string    `json:"name"`
	Network string    `json:"network"`
	Listen  string    `json:"listen"`
	Beacon  bool      `json:"beacon"`
	TAP     TAPStatus `json:"tap"`
	// Certificate is this node's certificate: when it expires.
	Certificate CertificateStatus `json:"certificate"`
	// Queues are the frames the daemon's own queues dropped to keep bulk
	// transfers from delaying everything else.
	Queues QueueStatus `json:"queues"`
	// Resolver is where the virtual DNS answers, when it is on: what
	// containers and DHCP clients are told to use.
	Resolver *ResolverStatus `json:"resolver,omitempty"`
	// Publications are the members' services this node exposes to
	// non-members, as their gateway.
	Publications []publish.Status `json:"publications,omitempty"`
	// XMPP is the rendezvous server's client, when configured.
	XMPP *XMPPStatus `json:"xmpp,omitempty"`
	node.Status
}

// ResolverStatus is the virtual DNS's address and domain.
type ResolverStatus struct {
	Address string `json:"address"`
	Domain  string `json:"domain"`
}

// CertificateStatus tells when the node's certificate runs out, so that
// it is renewed before the node loses every link.
type CertificateStatus struct {
	NotAfter time.Time `json:"not_after"`
	Issuer   string    `json:"issuer"` // the signing CA's fingerprint
	// ExpiresSoon is set within CertificateWarning of NotAfter, and after.
	ExpiresSoon bool `json:"expires_soon"`
}

// QueueStatus counts what the data path's queues dropped: from the fair
// queues between the TAP and the encryption (CoDel on a flow that keeps a
// standing queue, or the longest flow's head when the queue is full), and
// bulk frames CoDel dropped on receive, where the socket reader's backlog
// waited too long.
type QueueStatus struct {
	TAPDropped     uint64 `json:"tap_dropped"`
	ReceiveDropped uint64 `json:"receive_dropped"`
}

// TAPStatus describes the local virtual Ethernet device.
type TAPStatus struct {
	Name      string   `json:"name"`
	MTU       int      `json:"mtu"`
	MAC       string   `json:"mac"`
	Addresses []string `json:"addresses"`
	VnetHdr   bool     `json:"vnet_hdr"`
	TSO       bool     `json:"tso"`
	USO       bool     `json:"uso"`
	Queues    int      `json:"queues"`
}

// Status collects the daemon's status on the core goroutine.
func (d *Daemon) Status() (Status, error) {
	var st Status
	err := d.call(func() {
		st = Status{
			Name: d.cert.Name, Network: d.cfg.Network, Listen: d.conn.LocalAddr().String(),
			Certificate: CertificateStatus{NotAfter: d.cert.NotAfter, Issuer: d.cert.IssuerFingerprint(),
				ExpiresSoon: certificateExpiresSoon(d.cert, time.Now())},
			Beacon: d.cfg.Beacon.Enabled,
			TAP:    TAPStatus{MTU: d.mtu, MAC: d.mac.String()},
			Status: d.node.Status(),
		}
		if d.dev != nil {
			off := d.dev.Offloads()
			st.TAP.Name, st.TAP.Queues = d.dev.Name(), d.dev.NumQueues()
			st.TAP.VnetHdr, st.TAP.TSO, st.TAP.USO = off.VnetHdr, off.TSO, off.USO
			// Without a TAP a claimed subnet is routed nowhere, so only
			// a node with one names the bridge.
			for i := range st.Services.Subnets {
				st.Services.Subnets[i].Bridge = d.cfg.Services.Subnets.Bridge
			}
		}
		st.Publications = d.gateway.Status()
		if d.xmpp != nil {
			x := d.xmpp.Status()
			st.XMPP = &x
		}
		if dns := d.cfg.Services.DNS; dns.Enabled {
			st.Resolver = &ResolverStatus{Address: dns.Addr.String(), Domain: dns.Domain}
		}
		for _, p := range d.addrs {
			st.TAP.Addresses = append(st.TAP.Addresses, p.String())
		}
		for _, q := range d.tapQueues {
			st.Queues.TAPDropped += q.Drops.Load()
		}
		if d.receiveAQM != nil {
			st.Queues.ReceiveDropped = d.receiveAQM.Drops.Load()
		}
	})
	return st, err
}

// Request is a control-socket request: one JSON line.
type Request struct {
	Command string `json:"command"`
	// Revocation is the revocation to honour and spread (command
	// "revoke"), in its binary encoding.
	Revocation []byte `json:"revocation,omitempty"`
	// DHT is the operation of command "dht".
	DHT *DHTRequest `json:"dht,omitempty"`
	// Firewall is the question of command "firewall-check".
	Firewall *FirewallQuery `json:"firewall,omitempty"`
	// Setting is the change of command "network-set": a network-wide
	// setting and its new value, empty to remove it.
	Setting *SettingChange `json:"setting,omitempty"`
	// Ping is the member to ping once (command "ping").
	Ping *PingRequest `json:"ping,omitempty"`
	// Publication is the publication to expose (command "publish-add")
	// or the revocation of one (command "publish-revoke"), in its binary
	// encoding.
	Publication []byte `json:"publication,omitempty"`
}

// SettingChange changes one network-wide setting.
type SettingChange struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// DHTRequest is one operation on the network's DHT, made in this node's
// name: Op is "get", "put" or "delete"; TTL is the lease of a put.
type DHTRequest struct {
	Op    string        `json:"op"`
	Key   string        `json:"key"`
	Value []byte        `json:"value,omitempty"`
	TTL   time.Duration `json:"ttl,omitempty"`
}

// DHTAnswer is the DHT's answer: its status (ok, not-found, denied, ...)
// and the record it is about.
type DHTAnswer struct {
	Status  string    `json:"status"`
	Value   []byte    `json:"value,omitempty"`
	Owner   string    `json:"owner,omitempty"`
	Expires time.Time `json:"expires,omitzero"`
}

// Response is the control-socket reply: one JSON line.
type Response struct {
	Error    string             `json:"error,omitempty"`
	Status   *Status            `json:"status,omitempty"`
	Topology *node.TopologyView `json:"topology,omitempty"`
	// Revoked answers "revoke": the member cut off, and whether the
	// revocation was new to this node.
	Revoked *node.RevokedNode `json:"revoked,omitempty"`
	Fresh   bool              `json:"fresh,omitempty"`
	// DHT answers "dht".
	DHT *DHTAnswer `json:"dht,omitempty"`
	// Firewall answers "firewall-check".
	Firewall *FirewallAnswer `json:"firewall,omitempty"`
	// Settings answers "network-set": the settings now in force.
	Settings *node.NetworkSettings `json:"settings,omitempty"`
	// Ping answers "ping".
	Ping *PingAnswer `json:"ping,omitempty"`
	// Published answers "publish-add" and "publish-revoke": the
	// publication as exposed, or as it was when its revocation closed it
	// (none when it was not exposed here).
	Published *publish.Status `json:"published,omitempty"`
}

// DHT runs one operation on the DHT in this node's name and waits for the
// answer (the DHT gives one within its request timeout).
func (d *Daemon) DHT(req DHTRequest) (DHTAnswer, error) {
	answered := make(chan dht.Result, 1)
	reply := func(r dht.Result) { answered <- r }
	var bad error
	err := d.call(func() {
		d.node.WithDHT(time.Now(), func(kv dht.Client) {
			switch req.Op {
			case "get":
				kv.Get(req.Key, time.Now(), reply)
			case "put":
				kv.Put(req.Key, req.Value, req.TTL, time.Now(), reply)
			case "delete":
				kv.Delete(req.Key, time.Now(), reply)
			default:
				bad = fmt.Errorf("unknown DHT operation %q: want get, put or delete", req.Op)
			}
		})
	})
	if err == nil {
		err = bad
	}
	if err != nil {
		return DHTAnswer{}, err
	}
	r := <-answered
	a := DHTAnswer{Status: r.Status.String(), Value: r.Value, Expires: r.Expires}
	if r.Owner != (nid.ID{}) {
		a.Owner = r.Owner.String()
	}
	return a, nil
}

// ChangeSetting changes one network-wide setting in this node's name and
// waits for the DHT to take it.
func (d *Daemon) ChangeSetting(c SettingChange) (node.NetworkSettings, error) {
	type answer struct {
		s   node.NetworkSettings
		err error
	}
	answered := make(chan answer, 1)
	err := d.call(func() {
		d.node.ChangeSetting(c.Name, c.Value, time.Now(), func(s node.NetworkSettings, err error) { answered <- answer{s, err} })
	})
	if err != nil {
		return node.NetworkSettings{}, err
	}
	a := <-answered
	return a.s, a.err
}

// Topology returns the overlay map, and keeps the crawl behind it going
// for a while: asking again refreshes it.
func (d *Daemon) Topology() (node.TopologyView, error) {
	var v node.TopologyView
	err := d.call(func() {
		d.node.CrawlTopology(time.Now())
		v = d.node.Topology()
	})
	return v, err
}

type controlServer struct {
	path string
	ln   net.Listener
	d    *Daemon
}

func listenControl(path string, d *Daemon) (*controlServer, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	if c, err := net.Dial("unix", path); err == nil {
		c.Close()
		return nil, fmt.Errorf("control socket %s is in use: another burrow is running with this control_socket", path)
	}
	os.Remove(path) // a stale socket from a crashed run
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("control socket: %w", err)
	}
	return &controlServer{path: path, ln: ln, d: d}, nil
}

func (s *controlServer) serve() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		go s.handle(c)
	}
}

func (s *controlServer) handle(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(controlDeadline))
	var req Request
	line, err := bufio.NewReader(c).ReadBytes('\n')
	var resp Response
	if err != nil || json.Unmarshal(line, &req) != nil {
		resp.Error = "malformed request"
	} else {
		switch req.Command {
		case "ping":
			if req.Ping == nil {
				resp.Error = "ping: no member given"
				break
			}
			c.SetDeadline(time.Now().Add(pingDeadline(req.Ping.Timeout)))
			a, err := s.d.Ping(*req.Ping)
			reply(&resp, &resp.Ping, a, err)
		case "status":
			st, err := s.d.Status()
			reply(&resp, &resp.Status, st, err)
		case "topology":
			v, err := s.d.Topology()
			reply(&resp, &resp.Topology, v, err)
		case "dht":
			if req.DHT == nil {
				resp.Error = "dht: no operation given"
				break
			}
			a, err := s.d.DHT(*req.DHT)
			reply(&resp, &resp.DHT, a, err)
		case "firewall-check":
			if req.Firewall == nil {
				resp.Error = "firewall-check: no question given"
				break
			}
			a, err := s.d.CheckFirewall(*req.Firewall)
			reply(&resp, &resp.Firewall, a, err)
		case "network-set":
			if req.Setting == nil {
				resp.Error = "network-set: no setting given"
				break
			}
			s, err := s.d.ChangeSetting(*req.Setting)
			reply(&resp, &resp.Settings, s, err)
		case "containers-changed":
			if err := s.d.syncContainerNames(); err != nil {
				resp.Error = err.Error()
			}
		case "publish-add":
			st, err := s.d.Publish(req.Publication)
			reply(&resp, &resp.Published, st, err)
		case "publish-revoke":
			st, err := s.d.Unpublish(req.Publication)
			if err != nil {
				resp.Error = err.Error()
			}
			resp.Published = st
		case "revoke":
			revoked, fresh, err := s.d.Revoke(req.Revocation)
			if err != nil {
				resp.Error = err.Error()
			} else {
				resp.Revoked, resp.Fresh = &revoked, fresh
			}
		default:
			resp.Error = fmt.Sprintf("unknown command %q", req.Command)
		}
	}
	json.NewEncoder(c).Encode(resp)
}

// reply puts a command's answer, or its error, into resp.
func reply[T any](resp *Response, field **T, v T, err error) {
	if err != nil {
		resp.Error = err.Error()
		return
	}
	*field = &v
}

func (s *controlServer) close() {
	s.ln.Close()
	os.Remove(s.path)
}

// controlDeadline bounds one control request; a ping may take longer
// (pingDeadline).
const controlDeadline = 10 * time.Second

// pingDeadline bounds a ping request: finding the member, then its timeout.
func pingDeadline(timeout time.Duration) time.Duration {
	return resolveFor + min(max(timeout, 0), MaxPingTimeout) + 2*time.Second
}

// Query sends one request to the daemon behind the control socket at path.
func Query(path string, req Request) (*Response, error) {
	c, err := net.DialTimeout("unix", path, 2*time.Second)
	if err != nil {
		return nil, fmt.Errorf("cannot reach burrow at %s (is `burrow up` running, and are you root?): %w", path, err)
	}
	defer c.Close()
	deadline := controlDeadline
	if req.Ping != nil {
		deadline = pingDeadline(req.Ping.Timeout)
	}
	c.SetDeadline(time.Now().Add(deadline))
	if err := json.NewEncoder(c).Encode(req); err != nil {
		return nil, err
	}
	var resp Response
	if err := json.NewDecoder(c).Decode(&resp); err != nil {
		return nil, fmt.Errorf("reading reply from %s: %w", path, err)
	}
	if resp.Error != "" {
		return &resp, errors.New(resp.Error)
	}
	return &resp, nil
}
