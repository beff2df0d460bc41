package kernelpath

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// A probe asks a peer's kernel path whether it takes this node's frames:
// the peer's receiving program answers it in place, from the kernel, only
// when its daemon let this node's address in. So an answer proves the
// whole way — the program attached where this node's datagrams arrive,
// the peer's trust, the port — before a single frame is sent. Kind and
// balance change together (1,1 → 2,0), so the answer keeps the UDP
// checksum of the question.
const (
	ProbeLen     = 16
	probeMagic   = 0x4252574b // "BRWK"
	ProbeVersion = 1
	probeAsk     = 1
	probeAnswer  = 2
)

// AppendProbe appends a probe carrying nonce to b.
func AppendProbe(b []byte, nonce uint64) []byte {
	b = binary.BigEndian.AppendUint32(b, probeMagic)
	b = append(b, ProbeVersion, probeAsk, 0, 1)
	return binary.BigEndian.AppendUint64(b, nonce)
}

// ParseAnswer returns the nonce of a probe's answer.
func ParseAnswer(b []byte) (nonce uint64, ok bool) {
	if len(b) != ProbeLen || binary.BigEndian.Uint32(b) != probeMagic ||
		b[4] != ProbeVersion || b[5] != probeAnswer || b[7] != 0 {
		return 0, false
	}
	return binary.BigEndian.Uint64(b[8:]), true
}

// Available says why this kernel cannot run the kernel path, or nil: the
// programs must pass the verifier and TCX must be there.
func Available() error {
	p, err := Load(Options{Port: 1, TAP: 1, UnderlayMTU: 1500})
	if err != nil {
		return err
	}
	defer p.Close()
	// An interface that cannot exist: a kernel with TCX says so (ENODEV),
	// one without says it does not know the attach type.
	l, err := link.AttachTCX(link.TCXOptions{Interface: math.MaxInt32, Program: p.objs.KpIngress, Attach: ebpf.AttachTCXIngress})
	if err == nil {
		l.Close()
		return nil
	}
	if errors.Is(err, ebpf.ErrNotSupported) {
		return explain(err)
	}
	return nil
}

// Attached finds the kernel path attached to the device with index
// ifindex in this network namespace — the TAP's sending program when
// egress, an underlay device's receiving program otherwise — and reads
// its counters, which both programs share. ok is false when none is
// attached there. Tests and benchmarks use it to see a daemon's kernel
// path from outside.
func Attached(ifindex int, egress bool) (s Stats, ok bool, err error) {
	prog, err := attachedProgram(ifindex, egress)
	if prog == nil || err != nil {
		return s, false, err
	}
	defer prog.Close()
	info, err := prog.Info()
	if err != nil {
		return s, false, err
	}
	ids, _ := info.MapIDs()
	for _, id := range ids {
		m, err := ebpf.NewMapFromID(id)
		if err != nil {
			return s, false, err
		}
		mi, err := m.Info()
		if err == nil && mi.Name == "kp_stats" {
			s, err = readStats(m)
			m.Close()
			return s, err == nil, err
		}
		m.Close()
	}
	return s, false, nil
}

// RunTime is the CPU time the kernel path's program attached to ifindex
// (as in Attached) has spent and how often it ran, as the kernel counts
// them while kernel.bpf_stats_enabled is 1: the programs alone, not the
// kernel's work on the packets they redirect. ok is false when no program
// is attached or the kernel keeps no such statistics.
func RunTime(ifindex int, egress bool) (d time.Duration, runs uint64, ok bool, err error) {
	prog, err := attachedProgram(ifindex, egress)
	if prog == nil || err != nil {
		return 0, 0, false, err
	}
	defer prog.Close()
	st, err := prog.Stats()
	if err != nil {
		return 0, 0, false, err
	}
	return st.Runtime, st.RunCount, true, nil
}

// EnableRunTime has the kernel count the run time of every eBPF program
// (RunTime) until the returned closer is closed or this process ends. It
// costs a little on every program run, machine-wide, so only benchmarks
// use it.
func EnableRunTime() (io.Closer, error) { return ebpf.EnableStats(unix.BPF_STATS_RUN_TIME) }

func attachedProgram(ifindex int, egress bool) (*ebpf.Program, error) {
	attach, want := ebpf.AttachTCXIngress, "kp_ingress"
	if egress {
		attach, want = ebpf.AttachTCXEgress, "kp_egress"
	}
	res, err := link.QueryPrograms(link.QueryOptions{Target: ifindex, Attach: attach})
	if err != nil {
		return nil, fmt.Errorf("querying the TCX programs of ifindex %d: %w", ifindex, err)
	}
	for _, ap := range res.Programs {
		prog, err := ebpf.NewProgramFromID(ap.ID)
		if err != nil {
			return nil, err
		}
		info, err := prog.Info()
		if err == nil && info.Name == want {
			return prog, nil
		}
		prog.Close()
	}
	return nil, nil
}
