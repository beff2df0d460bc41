package vdns

import (
	"encoding/binary"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"

	"burrow/dht"
	"burrow/l2"
	"burrow/l2/udp4"
)

// client is where an answer goes.
type client struct {
	mac  l2.MAC
	addr netip.AddrPort
	size int // the largest answer it accepts over UDP
}

// formErr answers a message that does not parse, if at least its header
// does and it is a query.
func (r *Resolver) formErr(to client, payload []byte) {
	if len(payload) < 12 || payload[2]&0x80 != 0 {
		r.stats.Dropped++
		return
	}
	var m dns.Msg
	m.Id = binary.BigEndian.Uint16(payload)
	m.Response, m.Rcode = true, dns.RcodeFormatError
	to.size = dns.MinMsgSize
	r.send(to, &m)
}

// answerInDomain answers a name in the virtual domain: the apex, an
// automatic name, or a name registered in the DHT.
func (r *Resolver) answerInDomain(to client, q *dns.Msg, name string, now time.Time) {
	qtype := q.Question[0].Qtype
	if name == r.domain {
		m := r.reply(q)
		if qtype == dns.TypeSOA || qtype == dns.TypeANY {
			m.Answer = append(m.Answer, r.soa())
		} else {
			m.Ns = append(m.Ns, r.soa())
		}
		r.send(to, m)
		return
	}
	rel := strings.TrimSuffix(name, "."+r.domain)
	if ip, ok := ParseAutoName(r.cfg.Network, rel); ok {
		r.answerAddrs(to, q, []netip.Addr{ip})
		return
	}
	if _, err := canonicalName(rel); err != nil {
		r.nxdomain(to, q)
		return
	}
	if r.pending >= maxPending {
		r.answerRcode(to, q, dns.RcodeServerFailure)
		return
	}
	r.pending++
	r.kv.Get(r.key(rel), now, func(res dht.Result) {
		r.pending--
		switch res.Status {
		case dht.OK:
			r.answerAddrs(to, q, decodeAddrs(res.Value))
		case dht.NotFound:
			r.nxdomain(to, q)
		default:
			r.answerRcode(to, q, dns.RcodeServerFailure)
		}
	})
}

// answerAddrs answers with the addresses of the question's type; a name
// with none of that type gets an empty answer (NODATA).
func (r *Resolver) answerAddrs(to client, q *dns.Msg, addrs []netip.Addr) {
	question := q.Question[0]
	m := r.reply(q)
	hdr := func(t uint16) dns.RR_Header {
		return dns.RR_Header{Name: question.Name, Rrtype: t, Class: dns.ClassINET, Ttl: r.ttl()}
	}
	for _, a := range addrs {
		switch {
		case a.Is4() && (question.Qtype == dns.TypeA || question.Qtype == dns.TypeANY):
			m.Answer = append(m.Answer, &dns.A{Hdr: hdr(dns.TypeA), A: net.IP(a.AsSlice())})
		case a.Is6() && (question.Qtype == dns.TypeAAAA || question.Qtype == dns.TypeANY):
			m.Answer = append(m.Answer, &dns.AAAA{Hdr: hdr(dns.TypeAAAA), AAAA: net.IP(a.AsSlice())})
		}
	}
	if len(m.Answer) == 0 {
		m.Ns = append(m.Ns, r.soa())
	}
	r.send(to, m)
}

// ownReverse reports whether a reverse name is for an address in the
// virtual network.
func (r *Resolver) ownReverse(name string) bool {
	ip, ok := parseReverse(name)
	return ok && r.cfg.Network.IsValid() && r.cfg.Network.Contains(ip)
}

// parseReverse reads d.c.b.a.in-addr.arpa.
func parseReverse(name string) (netip.Addr, bool) {
	labels := dns.SplitDomainName(strings.TrimSuffix(name, "in-addr.arpa."))
	if len(labels) != 4 {
		return netip.Addr{}, false
	}
	ip, err := netip.ParseAddr(labels[3] + "." + labels[2] + "." + labels[1] + "." + labels[0])
	return ip, err == nil
}

func (r *Resolver) answerPTR(to client, q *dns.Msg, name string) {
	ip, _ := parseReverse(name)
	auto, _ := AutoName(r.cfg.Network, ip)
	question := q.Question[0]
	m := r.reply(q)
	if question.Qtype == dns.TypePTR || question.Qtype == dns.TypeANY {
		m.Answer = append(m.Answer, &dns.PTR{
			Hdr: dns.RR_Header{Name: question.Name, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: r.ttl()},
			Ptr: auto + "." + r.domain,
		})
	}
	r.send(to, m)
}

func (r *Resolver) nxdomain(to client, q *dns.Msg) {
	m := r.reply(q)
	m.Rcode = dns.RcodeNameError
	m.Ns = append(m.Ns, r.soa())
	r.send(to, m)
}

func (r *Resolver) answerRcode(to client, q *dns.Msg, rcode int) {
	m := new(dns.Msg)
	m.SetRcode(q, rcode)
	m.RecursionAvailable = r.cfg.Forward
	r.send(to, m)
}

// reply starts an authoritative answer to q.
func (r *Resolver) reply(q *dns.Msg) *dns.Msg {
	m := new(dns.Msg)
	m.SetReply(q)
	m.Authoritative = true
	m.RecursionAvailable = r.cfg.Forward
	return m
}

func (r *Resolver) ttl() uint32 { return uint32(r.cfg.AnswerTTL / time.Second) }

// soa is the domain's start of authority, carried in negative answers so
// that resolvers cache them for AnswerTTL.
func (r *Resolver) soa() dns.RR {
	return &dns.SOA{
		Hdr:     dns.RR_Header{Name: r.domain, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: r.ttl()},
		Ns:      "ns." + r.domain,
		Mbox:    "hostmaster." + r.domain,
		Serial:  1,
		Refresh: 3600,
		Retry:   600,
		Expire:  86400,
		Minttl:  r.ttl(),
	}
}

type forwarded struct {
	to       client
	query    *dns.Msg
	deadline time.Time
}

// forwardQuery hands a query for an outside name to the runtime.
func (r *Resolver) forwardQuery(to client, q *dns.Msg, payload []byte, now time.Time) {
	if len(r.forwards) >= maxPending {
		r.answerRcode(to, q, dns.RcodeServerFailure)
		return
	}
	r.nextID++
	r.forwards[r.nextID] = &forwarded{to: to, query: q, deadline: now.Add(r.cfg.ForwardTimeout)}
	r.stats.Forwarded++
	r.forward(ForwardRequest{ID: r.nextID, Query: slices.Clone(payload)})
}

// Forwarded relays the answer to forward request id. An answer that does
// not parse or does not answer the question is treated as a failure.
func (r *Resolver) Forwarded(id uint64, answer []byte, now time.Time) {
	f := r.forwards[id]
	if f == nil {
		return // too late, or never asked
	}
	delete(r.forwards, id)
	var m dns.Msg
	if err := m.Unpack(answer); err != nil || !m.Response || len(m.Question) != 1 ||
		!strings.EqualFold(m.Question[0].Name, f.query.Question[0].Name) || m.Question[0].Qtype != f.query.Question[0].Qtype {
		r.answerRcode(f.to, f.query, dns.RcodeServerFailure)
		return
	}
	m.Id = f.query.Id
	r.send(f.to, &m)
}

// send packs m, cut to what the client accepts, into a frame to it.
func (r *Resolver) send(to client, m *dns.Msg) {
	switch m.Rcode {
	case dns.RcodeSuccess:
		r.stats.Answered++
	case dns.RcodeNameError:
		r.stats.NXDomain++
	case dns.RcodeRefused:
		r.stats.Refused++
	case dns.RcodeServerFailure:
		r.stats.ServFail++
	case dns.RcodeFormatError:
		r.stats.FormErr++
	}
	if to.size > dns.MinMsgSize && m.IsEdns0() == nil {
		m.SetEdns0(ednsSize, false)
	}
	m.Truncate(min(to.size, ednsSize))
	payload, err := m.Pack()
	if err != nil {
		r.stats.Dropped++
		return
	}
	frame, err := udp4.Append(r.buf[:0], udp4.Datagram{
		SrcMAC:  r.cfg.ServerMAC,
		DstMAC:  to.mac,
		Src:     netip.AddrPortFrom(r.cfg.Server, 53),
		Dst:     to.addr,
		Payload: payload,
	})
	if err != nil {
		r.stats.Dropped++
		return
	}
	r.buf = frame
	r.out(frame)
}
