package netlab_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"burrow/netlab"
)

// helperArg as the first argument turns the test binary into a small tool
// that tests run inside lab namespaces: the tests need sockets there, and a
// process started with ip netns exec is the simplest way to get them.
const helperArg = "netlab-test-helper"

func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == helperArg {
		if err := runHelper(os.Args[2], os.Args[3:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// probeTimeout bounds a probe's wait for an answer; lab round trips take
// well under a millisecond, so this is only paid by probes that must fail.
const probeTimeout = 500 * time.Millisecond

func runHelper(mode string, args []string) error {
	switch mode {
	case "serve": // serve NETWORK PORT: answer everyone with their address
		return serve(args[0], args[1])
	case "probe": // probe NETWORK LOCALPORT ADDR:PORT: print the answer
		return probe(args[0], args[1], args[2])
	case "crash": // crash LOGDIR: build a lab, print its prefix, exit
		return crash(args[0])
	case "await-signal": // await-signal LOGDIR: build a lab, print its prefix, wait
		return awaitSignal(args[0])
	}
	return fmt.Errorf("unknown helper mode %q", mode)
}

func serve(network, port string) error {
	if network == "udp" {
		conn, err := net.ListenPacket("udp4", ":"+port)
		if err != nil {
			return err
		}
		buf := make([]byte, 1500)
		for {
			_, from, err := conn.ReadFrom(buf)
			if err != nil {
				return err
			}
			conn.WriteTo([]byte(from.String()), from)
		}
	}
	ln, err := net.Listen("tcp4", ":"+port)
	if err != nil {
		return err
	}
	for {
		conn, err := ln.Accept()
		if err != nil {
			return err
		}
		conn.Write([]byte(conn.RemoteAddr().String()))
		conn.Close()
	}
}

func probe(network, localPort, remote string) error {
	port, err := strconv.Atoi(localPort)
	if err != nil {
		return err
	}
	dialer := net.Dialer{Timeout: probeTimeout}
	if network == "udp" {
		dialer.LocalAddr = &net.UDPAddr{Port: port}
	} else {
		dialer.LocalAddr = &net.TCPAddr{Port: port}
	}
	conn, err := dialer.Dial(network+"4", remote)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(probeTimeout))
	if _, err := conn.Write([]byte("?")); err != nil {
		return err
	}
	buf := make([]byte, 100)
	n, err := conn.Read(buf)
	if err != nil {
		return err
	}
	fmt.Print(string(buf[:n]))
	return nil
}

// crash leaves a lab with a running process behind, as a program that dies
// before closing its lab would: the helper exits without calling Close.
func crash(logDir string) error {
	lab, err := netlab.New(netlab.Options{LogDir: logDir})
	if err != nil {
		return err
	}
	host, err := lab.AddHost("a")
	if err != nil {
		return err
	}
	if _, err := host.Start("sleep", "60"); err != nil {
		return err
	}
	fmt.Print(lab.Prefix())
	return nil
}

// awaitSignal leaves it to CloseAllOnSignal to close a lab and end the
// helper.
func awaitSignal(logDir string) error {
	netlab.CloseAllOnSignal()
	lab, err := netlab.New(netlab.Options{LogDir: logDir})
	if err != nil {
		return err
	}
	if _, err := lab.AddHost("a"); err != nil {
		return err
	}
	fmt.Println(lab.Prefix())
	time.Sleep(time.Minute)
	return errors.New("no signal came")
}

func testExecutable(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// startServer runs the answering helper on the host and waits until it
// listens.
func startServer(t *testing.T, host *netlab.Host, network string, port uint16) {
	t.Helper()
	if _, err := host.Start(testExecutable(t), helperArg, "serve", network, strconv.Itoa(int(port))); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := host.WaitListening(ctx, network, port); err != nil {
		t.Fatal(err)
	}
}

// probeFrom asks the server at to for the address it sees the probe come
// from, sending from localPort (0: any).
func probeFrom(t *testing.T, from *netlab.Host, network string, localPort int, to netip.AddrPort) (netip.AddrPort, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := from.Run(ctx, testExecutable(t), helperArg, "probe", network, strconv.Itoa(localPort), to.String())
	if err != nil {
		return netip.AddrPort{}, err
	}
	seen, err := netip.ParseAddrPort(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("probe answer %q: %v", out, err)
	}
	return seen, nil
}
