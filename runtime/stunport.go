package runtime

import (
	"net"
	"net/netip"
	"time"

	"burrow/nat"
	"burrow/node"
)

// serveSecondSTUNPort answers STUN binding requests at the port after the
// beacon's own (nat.SecondPort), where members ask besides the beacon's
// port: a NAT that maps every destination to a new port shows two
// mappings, and its members know to probe (node's birthday.go). A request
// that asks for the other port (burrow netcheck's filtering test) is
// answered from the beacon's own. Only a beacon does this; one whose
// second port is taken goes on without it.
func (d *Daemon) serveSecondSTUNPort(listen netip.AddrPort) {
	addr, ok := nat.SecondPort(listen)
	if !ok {
		return
	}
	conn, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(addr))
	if err != nil {
		d.log.Warn("no STUN at the beacon's second port: members behind NATs that map every destination anew cannot tell so from this beacon alone", "port", addr.Port(), "err", err)
		return
	}
	d.tr.stun = conn
	go d.answerSTUN(conn)
}

// answerSTUN answers the binding requests that come to conn until it
// closes: never more bytes than a request had, at most as many as
// node.NewSTUNLimiter allows.
func (d *Daemon) answerSTUN(conn *net.UDPConn) {
	limit := node.NewSTUNLimiter()
	buf := make([]byte, 1500)
	for {
		n, from, err := conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
		m, err := nat.Parse(buf[:n])
		if err != nil || !m.Request || !limit.Allow(from.Addr(), time.Now()) {
			continue
		}
		answer, err := nat.Answer(m, n, from)
		if err != nil {
			continue
		}
		if !m.ChangePort {
			conn.WriteToUDPAddrPort(answer, from)
		} else if d.conn != nil {
			d.conn.WriteTo(answer, from)
		}
	}
}
