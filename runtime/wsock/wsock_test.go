package wsock_test

import (
	"bufio"
	"burrow/leaktest"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"burrow/runtime/wsock"
)

// checkGoroutines fails the test if a goroutine of the code under test
// outlives it.
func checkGoroutines(t *testing.T) {
	leaktest.Check(t, "burrow/runtime/wsock", "github.com/coder/websocket", "net/http.")
}

// message is a datagram a server received.
type message struct {
	conn uint32
	data []byte
}

// testServer is a server whose callbacks report on channels.
type testServer struct {
	*wsock.Server
	messages chan message
	opened   chan uint32
	closed   chan uint32
}

func startServer(t *testing.T, cfg wsock.ServerConfig) *testServer {
	t.Helper()
	s := &testServer{messages: make(chan message, 8192), opened: make(chan uint32, 64), closed: make(chan uint32, 64)}
	cfg.Listen = "127.0.0.1:0"
	cfg.Deliver = func(conn uint32, b []byte) { s.messages <- message{conn, bytes.Clone(b)} }
	cfg.OnOpen = func(conn uint32, remote netip.AddrPort) {
		if !remote.Addr().IsLoopback() {
			t.Errorf("connection %d from %v, want loopback", conn, remote)
		}
		s.opened <- conn
	}
	cfg.OnClose = func(conn uint32, _ netip.AddrPort) { s.closed <- conn }
	var err error
	if s.Server, err = wsock.NewServer(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func (s *testServer) url(scheme string) string {
	return fmt.Sprintf("%s://%s/burrow", scheme, s.Addr())
}

// testClient is a client whose deliveries arrive on a channel.
type testClient struct {
	*wsock.Client
	messages chan []byte
}

func dial(t *testing.T, cfg wsock.ClientConfig) *testClient {
	t.Helper()
	c := &testClient{messages: make(chan []byte, 8192)}
	cfg.Deliver = func(b []byte) { c.messages <- bytes.Clone(b) }
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var err error
	if c.Client, err = wsock.Dial(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// receive waits for something on ch.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatalf("no %s within 5 s", what)
		panic("unreachable")
	}
}

// datagramSizes cover WebSocket's three length encodings and their edges,
// the usual tunnel sizes and the largest datagram.
var datagramSizes = []int{0, 1, 7, 125, 126, 127, 1280, 1400, 1500, 2048, 2049, 9000, 65535, 65535 - 1, 65536 - 126}

// testDatagram is datagram seq of a run: its sequence number and a pattern.
func testDatagram(seq int) []byte {
	b := make([]byte, datagramSizes[seq%len(datagramSizes)])
	for i := range b {
		b[i] = byte(seq*7 + i*31)
	}
	if len(b) >= 4 {
		binary.BigEndian.PutUint32(b, uint32(seq))
	}
	return b
}

// sendInBackground sends the datagrams in order, waiting when the queue is
// full (a test wants them all), and reports how that went once done.
func sendInBackground(send func([]byte) error, count int) <-chan error {
	result := make(chan error, 1)
	go func() {
		for seq := 0; seq < count; seq++ {
			err := send(testDatagram(seq))
			for errors.Is(err, wsock.ErrQueueFull) {
				time.Sleep(time.Millisecond)
				err = send(testDatagram(seq))
			}
			if err != nil {
				result <- fmt.Errorf("send %d: %w", seq, err)
				return
			}
		}
		result <- nil
	}()
	return result
}

// TestDatagramsArriveWholeBothWays: each datagram is one message, so every
// one arrives intact, alone and in order, whatever its size.
func TestDatagramsArriveWholeBothWays(t *testing.T) {
	checkGoroutines(t)
	server := startServer(t, wsock.ServerConfig{Path: "/burrow"})
	client := dial(t, wsock.ClientConfig{URL: server.url("ws")})
	conn := receive(t, server.opened, "OnOpen")

	const count = 3000
	sent := sendInBackground(client.Send, count)
	for seq := range count {
		m := receive(t, server.messages, fmt.Sprintf("datagram %d at the server", seq))
		if m.conn != conn || !bytes.Equal(m.data, testDatagram(seq)) {
			t.Fatalf("datagram %d arrived on connection %d as %d bytes, want connection %d, %d bytes intact",
				seq, m.conn, len(m.data), conn, len(testDatagram(seq)))
		}
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	sent = sendInBackground(func(b []byte) error { return server.Send(conn, b) }, count)
	for seq := range count {
		got := receive(t, client.messages, fmt.Sprintf("datagram %d at the client", seq))
		if !bytes.Equal(got, testDatagram(seq)) {
			t.Fatalf("datagram %d arrived as %d bytes, want %d intact", seq, len(got), len(testDatagram(seq)))
		}
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	if st := client.Stats(); st.Sent != count || st.Received != count {
		t.Errorf("client counted %+v, want %d sent and received", st, count)
	}

	if err := client.Send(make([]byte, 65536)); !errors.Is(err, wsock.ErrTooLarge) {
		t.Errorf("sending 65536 bytes: %v, want ErrTooLarge", err)
	}
	client.Close()
	if got := receive(t, server.closed, "OnClose"); got != conn {
		t.Errorf("OnClose for connection %d, want %d", got, conn)
	}
	if err := server.Send(conn, []byte("late")); !errors.Is(err, wsock.ErrUnknownConn) {
		t.Errorf("Send after OnClose: %v, want ErrUnknownConn", err)
	}
	if err := client.Send([]byte("late")); !errors.Is(err, wsock.ErrClosed) {
		t.Errorf("client Send after Close: %v, want ErrClosed", err)
	}
}

// rawDial connects with the WebSocket library directly, to send what a
// wsock client never would.
func rawDial(t *testing.T, url string) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	transport := &http.Transport{}
	t.Cleanup(transport.CloseIdleConnections)
	ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: &http.Client{Transport: transport}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	return ws
}

// closeStatus reads from ws until the server closes it and returns the
// status it gave.
func closeStatus(t *testing.T, ws *websocket.Conn) websocket.StatusCode {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		if _, _, err := ws.Read(ctx); err != nil {
			return websocket.CloseStatus(err)
		}
	}
}

// TestBadInputClosesOnlyItsConnection: oversize, text and malformed
// messages and non-WebSocket requests cost their sender its connection,
// while another client goes on undisturbed.
func TestBadInputClosesOnlyItsConnection(t *testing.T) {
	checkGoroutines(t)
	server := startServer(t, wsock.ServerConfig{Path: "/burrow", Limits: wsock.Limits{MaxMessageSize: 1000}})
	good := dial(t, wsock.ClientConfig{URL: server.url("ws"), Limits: wsock.Limits{MaxMessageSize: 1000}})
	goodConn := receive(t, server.opened, "OnOpen")
	if err := good.Send(make([]byte, 1001)); !errors.Is(err, wsock.ErrTooLarge) {
		t.Errorf("client sending 1001 bytes: %v, want ErrTooLarge", err)
	}

	t.Run("oversize", func(t *testing.T) {
		ws := rawDial(t, server.url("ws"))
		ws.Write(context.Background(), websocket.MessageBinary, make([]byte, 1001))
		if got := closeStatus(t, ws); got != websocket.StatusMessageTooBig {
			t.Errorf("closed with %v, want %v", got, websocket.StatusMessageTooBig)
		}
	})
	t.Run("text", func(t *testing.T) {
		ws := rawDial(t, server.url("ws"))
		ws.Write(context.Background(), websocket.MessageText, []byte("hello"))
		if got := closeStatus(t, ws); got != websocket.StatusUnsupportedData {
			t.Errorf("closed with %v, want %v", got, websocket.StatusUnsupportedData)
		}
	})
	t.Run("malformed frame", func(t *testing.T) {
		conn, br := rawUpgrade(t, server.Addr().String(), "/burrow")
		// A masked frame with the reserved opcode 0x3.
		conn.Write([]byte{0x83, 0x84, 1, 2, 3, 4, 'a', 'b', 'c', 'd'})
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadAll(br); err != nil && !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("the connection stayed open: %v", err)
		}
	})
	t.Run("not WebSocket", func(t *testing.T) {
		conn, err := net.Dial("tcp", server.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		request := "\x16\x03\x01 definitely not HTTP\r\n\r\n"
		conn.Write([]byte(request))
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		// The server's 400 answer is longer than the request, so it
		// closes the connection without one.
		answer, err := io.ReadAll(conn)
		if err != nil {
			t.Errorf("the connection stayed open: %v", err)
		}
		if len(answer) > len(request) {
			t.Errorf("a request of %d bytes drew %d: %q", len(request), len(answer), answer)
		}
	})

	for range 3 { // the three WebSocket connections above
		receive(t, server.opened, "OnOpen")
		receive(t, server.closed, "OnClose")
	}
	if st := server.Stats(); st.Broken < 2 {
		t.Errorf("server counted %d broken connections, want the oversize and the text one at least", st.Broken)
	}
	if err := good.Send([]byte("still here")); err != nil {
		t.Fatal(err)
	}
	if m := receive(t, server.messages, "the good client's datagram"); m.conn != goodConn || string(m.data) != "still here" {
		t.Errorf("got %q on connection %d", m.data, m.conn)
	}
	if err := server.Send(goodConn, []byte("and you")); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, good.messages, "the server's answer"); string(got) != "and you" {
		t.Errorf("got %q", got)
	}
}

// rawUpgrade performs the WebSocket handshake by hand and returns the
// connection, to send bytes no library would.
func rawUpgrade(t *testing.T, addr, path string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", path, addr)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade answered %s", resp.Status)
	}
	return conn, br
}

func TestMaxConnsRefusesMore(t *testing.T) {
	checkGoroutines(t)
	server := startServer(t, wsock.ServerConfig{Path: "/burrow", MaxConns: 2})
	first := dial(t, wsock.ClientConfig{URL: server.url("ws")})
	dial(t, wsock.ClientConfig{URL: server.url("ws")})
	receive(t, server.opened, "OnOpen")
	receive(t, server.opened, "OnOpen")

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := wsock.Dial(ctx, wsock.ClientConfig{URL: server.url("ws"), Deliver: func([]byte) {}})
	if err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("third connection: %v, want refused with 503", err)
	}
	if st := server.Stats(); st.Refused != 1 {
		t.Errorf("server counted %d refused connections, want 1", st.Refused)
	}
	first.Close()
	receive(t, server.closed, "OnClose")
	dial(t, wsock.ClientConfig{URL: server.url("ws")})
}

// TestSlowPeerNeverBlocksSend: a peer that reads nothing fills its queue;
// Send drops and counts instead of waiting, and the write timeout
// disconnects the peer.
func TestSlowPeerNeverBlocksSend(t *testing.T) {
	checkGoroutines(t)
	server := startServer(t, wsock.ServerConfig{Path: "/burrow", Limits: wsock.Limits{WriteTimeout: 300 * time.Millisecond}})
	rawDial(t, server.url("ws")) // never reads
	conn := receive(t, server.opened, "OnOpen")

	datagram := make([]byte, 65535)
	var slowest time.Duration
	full := 0
	for range 2000 {
		start := time.Now()
		err := server.Send(conn, datagram)
		slowest = max(slowest, time.Since(start))
		if errors.Is(err, wsock.ErrQueueFull) {
			full++
		} else if err != nil && !errors.Is(err, wsock.ErrClosed) && !errors.Is(err, wsock.ErrUnknownConn) {
			t.Fatal(err)
		}
	}
	if slowest > 50*time.Millisecond {
		t.Errorf("the slowest Send took %v", slowest)
	}
	if full == 0 || server.Stats().Dropped == 0 {
		t.Errorf("%d sends found the queue full, %d dropped; want drops", full, server.Stats().Dropped)
	}
	receive(t, server.closed, "OnClose after the write timeout")
	if st := server.Stats(); st.Broken != 1 {
		t.Errorf("server counted %d broken connections, want 1", st.Broken)
	}
}

// TestSilentPeerIsClosed: a peer that answers no ping is disconnected after
// the idle timeout; a live but idle one stays.
func TestSilentPeerIsClosed(t *testing.T) {
	checkGoroutines(t)
	const idle = 200 * time.Millisecond
	server := startServer(t, wsock.ServerConfig{Path: "/burrow", Limits: wsock.Limits{IdleTimeout: idle}})
	live := dial(t, wsock.ClientConfig{URL: server.url("ws")})
	liveConn := receive(t, server.opened, "OnOpen")
	rawDial(t, server.url("ws")) // never reads, so never answers a ping
	silentConn := receive(t, server.opened, "OnOpen")

	start := time.Now()
	if got := receive(t, server.closed, "OnClose of the silent peer"); got != silentConn {
		t.Fatalf("connection %d closed, want the silent %d", got, silentConn)
	}
	if took := time.Since(start); took < idle || took > 4*idle {
		t.Errorf("the silent peer was closed after %v, want about %v", took, idle)
	}
	time.Sleep(5 * idle)
	select {
	case <-live.Done():
		t.Fatalf("the live idle client was disconnected: %v", live.Err())
	default:
	}
	if err := server.Send(liveConn, []byte("ping me")); err != nil {
		t.Fatal(err)
	}
	receive(t, live.messages, "a datagram on the idle connection")
}

// TestServerCloseUnblocksEverything: Close ends connections in every state
// (idle, blocked writing to a peer that does not read, mid-handshake) and
// leaves no goroutine behind.
func TestServerCloseUnblocksEverything(t *testing.T) {
	checkGoroutines(t)
	server := startServer(t, wsock.ServerConfig{Path: "/burrow"})
	var clients []*testClient
	for range 3 {
		clients = append(clients, dial(t, wsock.ClientConfig{URL: server.url("ws")}))
		receive(t, server.opened, "OnOpen")
	}
	rawDial(t, server.url("ws")) // never reads
	stuck := receive(t, server.opened, "OnOpen")
	for range 200 {
		server.Send(stuck, make([]byte, 65535))
	}
	halfOpen, err := net.Dial("tcp", server.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer halfOpen.Close()
	halfOpen.Write([]byte("GET /burrow HTTP/1.1\r\nHost: x\r\n")) // and never the end of the headers

	closed := make(chan error)
	go func() { closed <- server.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	for i, c := range clients {
		select {
		case <-c.Done():
		case <-time.After(5 * time.Second):
			t.Fatalf("client %d did not notice the server closing", i)
		}
		if err := c.Send([]byte("x")); !errors.Is(err, wsock.ErrClosed) {
			t.Errorf("client %d Send after the end: %v, want ErrClosed", i, err)
		}
	}
	if err := server.Send(stuck, []byte("x")); !errors.Is(err, wsock.ErrUnknownConn) {
		t.Errorf("Send after Close: %v, want ErrUnknownConn", err)
	}
	if _, err := wsock.Dial(context.Background(), wsock.ClientConfig{URL: server.url("ws"), Deliver: func([]byte) {}}); err == nil {
		t.Error("dialing a closed server succeeded")
	}
}

// selfSigned makes a certificate for 127.0.0.1 and a pool trusting it.
func selfSigned(t testing.TB) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	template := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "burrow test beacon"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, roots
}

func TestTLS(t *testing.T) {
	checkGoroutines(t)
	cert, roots := selfSigned(t)
	server := startServer(t, wsock.ServerConfig{Path: "/burrow", TLS: &tls.Config{Certificates: []tls.Certificate{cert}}})
	client := dial(t, wsock.ClientConfig{URL: server.url("wss"), TLS: &tls.Config{RootCAs: roots}})
	conn := receive(t, server.opened, "OnOpen")

	const count = 500
	sent := sendInBackground(client.Send, count)
	for seq := range count {
		if m := receive(t, server.messages, "datagram at the server"); !bytes.Equal(m.data, testDatagram(seq)) {
			t.Fatalf("datagram %d damaged", seq)
		}
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	sent = sendInBackground(func(b []byte) error { return server.Send(conn, b) }, count)
	for seq := range count {
		if got := receive(t, client.messages, "datagram at the client"); !bytes.Equal(got, testDatagram(seq)) {
			t.Fatalf("datagram %d damaged", seq)
		}
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := wsock.Dial(ctx, wsock.ClientConfig{URL: server.url("wss"), Deliver: func([]byte) {}})
	var unknownCA x509.UnknownAuthorityError
	if !errors.As(err, &unknownCA) {
		t.Errorf("dialing without trusting the certificate: %v, want an unknown authority error", err)
	}
}

// BenchmarkLoopback measures datagrams from a client to the server over
// loopback, one WebSocket message each, the node-to-beacon direction of
// burrow's WebSocket links. Send waits here when the queue is full, so the
// figure is what the connection carries, not what it drops.
func BenchmarkLoopback(b *testing.B) {
	for _, tc := range []struct {
		name string
		size int
		tls  bool
	}{
		{"ws/1400B", 1400, false},
		{"wss/1400B", 1400, true},
		{"ws/64KiB", 65535, false},
		{"wss/64KiB", 65535, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var mu sync.Mutex
			received := 0
			done := make(chan struct{})
			cfg := wsock.ServerConfig{Listen: "127.0.0.1:0", Path: "/burrow", Deliver: func(uint32, []byte) {
				mu.Lock()
				received++
				if received == b.N {
					close(done)
				}
				mu.Unlock()
			}}
			scheme, clientTLS := "ws", (*tls.Config)(nil)
			if tc.tls {
				cert, roots := selfSigned(b)
				cfg.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
				scheme, clientTLS = "wss", &tls.Config{RootCAs: roots}
			}
			server, err := wsock.NewServer(cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer server.Close()
			client, err := wsock.Dial(context.Background(), wsock.ClientConfig{
				URL: fmt.Sprintf("%s://%s/burrow", scheme, server.Addr()), TLS: clientTLS, Deliver: func([]byte) {},
			})
			if err != nil {
				b.Fatal(err)
			}
			defer client.Close()
			datagram := make([]byte, tc.size)
			b.SetBytes(int64(tc.size))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				for errors.Is(client.Send(datagram), wsock.ErrQueueFull) {
					time.Sleep(50 * time.Microsecond) // the writer has hundreds queued
				}
			}
			<-done
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "datagrams/s")
		})
	}
}

// BenchmarkTCPBaseline carries the same datagrams over a bare loopback TCP
// connection, a 2-byte length before each and one write per datagram as
// the WebSocket writer does: the floor under any stream-based tunnel, to
// read BenchmarkLoopback against.
func BenchmarkTCPBaseline(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	read := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			read <- err
			return
		}
		defer conn.Close()
		br := bufio.NewReader(conn)
		buf := make([]byte, 65535)
		for range b.N {
			if _, err := io.ReadFull(br, buf[:2]); err != nil {
				read <- err
				return
			}
			if _, err := io.ReadFull(br, buf[:binary.BigEndian.Uint16(buf)]); err != nil {
				read <- err
				return
			}
		}
		read <- nil
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	const size = 1400
	framed := binary.BigEndian.AppendUint16(nil, size)
	framed = append(framed, make([]byte, size)...)
	b.SetBytes(size)
	b.ResetTimer()
	for range b.N {
		if _, err := conn.Write(framed); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-read; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "datagrams/s")
}

// TestNoRequestDrawsALongerAnswer: before the upgrade the server sends no
// more bytes than it received, whatever it was sent; an upgrade request of
// the least length a client can send is still answered.
func TestNoRequestDrawsALongerAnswer(t *testing.T) {
	checkGoroutines(t)
	server := startServer(t, wsock.ServerConfig{Path: "/burrow"})
	for _, tc := range []struct {
		name, request string
		wantUpgrade   bool
	}{
		{"another path", "GET /x HTTP/1.1\r\nHost: a\r\n\r\n", false},
		{"not a request", "x\r\n\r\n", false},
		{"no upgrade asked", "GET /burrow HTTP/1.1\r\nHost: a\r\n\r\n", false},
		{"bad upgrade", "GET /burrow HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n", false},
		{"least upgrade", "GET /burrow HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
			"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", server.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := io.WriteString(conn, tc.request); err != nil {
				t.Fatal(err)
			}
			conn.SetReadDeadline(time.Now().Add(time.Second))
			answer, err := io.ReadAll(conn)
			if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatal(err)
			}
			if len(answer) > len(tc.request) {
				t.Errorf("a request of %d bytes drew %d: %q", len(tc.request), len(answer), answer)
			}
			if upgraded := bytes.HasPrefix(answer, []byte("HTTP/1.1 101 ")); upgraded != tc.wantUpgrade {
				t.Errorf("answer %q, want upgraded %v", answer, tc.wantUpgrade)
			}
		})
	}
}
