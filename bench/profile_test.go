package bench

import (
	"math"
	"slices"
	"strings"
	"testing"
)

// What `perf report --no-children --sort sym -g none -F overhead,sample,sym`
// printed for a daemon (shortened); perf does not sort it by overhead.
const flatPerfReport = `# To display the perf.data header info, please use --header/--header-only options.
#
# Samples: 2K of event 'cpu-clock'
# Event count (approx.): 2721721719
#
# Overhead       Samples  Symbol
# ........  ............  ..................................................
#
     7.06%           192  [k] _raw_spin_unlock_irqrestore
    20.30%           552  [.] crypto/internal/fips140/aes/gcm.gcmAesEnc.abi0
    14.56%           396  [k] finish_task_switch.isra.0
     1.73%            47  [.] burrow/node.(*Dataplane).seal
     1.88%            51  [.] runtime.memmove
     0.04%             1  [.] 0x00000000004a1b2c
     0.66%            18  [.] burrow/l2.l4Packet.setPartialChecksum


#
# (Cannot load tips.txt file, please install perf!)
#
`

func TestParsePerfReport(t *testing.T) {
	entries := parsePerfReport(flatPerfReport)
	var symbols []string
	samples := 0
	for _, e := range entries {
		symbols = append(symbols, e.Symbol)
		samples += e.Samples
	}
	want := []string{"crypto/internal/fips140/aes/gcm.gcmAesEnc.abi0", "finish_task_switch.isra.0", "_raw_spin_unlock_irqrestore",
		"runtime.memmove", "burrow/node.(*Dataplane).seal", "burrow/l2.l4Packet.setPartialChecksum", "0x00000000004a1b2c"}
	if !slices.Equal(symbols, want) {
		t.Errorf("functions, most samples first:\n%s\nwant:\n%s", strings.Join(symbols, "\n"), strings.Join(want, "\n"))
	}
	if samples != 1257 {
		t.Errorf("%d samples, want 1257", samples)
	}
	if first := entries[0]; first.Percent != 20.30 || first.Kernel || !entries[1].Kernel {
		t.Errorf("first entries %+v, %+v", entries[0], entries[1])
	}
}

func TestParseInclusiveReport(t *testing.T) {
	out := `# Children      Self  Symbol
    76.87%     0.07%  [.] burrow/runtime.(*Daemon).runTAPReader
    83.96%     0.00%  [.] runtime.goexit.abi0
    31.78%     0.04%  [k] __x64_sys_sendmmsg
`
	got := parseInclusiveReport(out)
	want := []inclusiveEntry{
		{83.96, 0, false, "runtime.goexit.abi0"},
		{76.87, 0.07, false, "burrow/runtime.(*Daemon).runTAPReader"},
		{31.78, 0.04, true, "__x64_sys_sendmmsg"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("inclusive entries %+v, want %+v", got, want)
	}
}

func TestGoPackage(t *testing.T) {
	for symbol, want := range map[string]string{
		"burrow/runtime/udpio.(*Conn).ReadBatch":                             "burrow/runtime/udpio",
		"runtime.memmove":                                                    "runtime",
		"crypto/internal/fips140/aes/gcm.gcmAesEnc.abi0":                     "crypto/internal/fips140/aes/gcm",
		"golang.org/x/crypto/chacha20poly1305.(*chacha20poly1305).seal":      "golang.org/x/crypto/chacha20poly1305",
		"slices.SortFunc[go.shape.*burrow/node.flow,go.shape.func(a, b)]":    "slices",
		"burrow/l2.(*Coalescer).addTCP":                                      "burrow/l2",
		"internal/runtime/syscall/linux.Syscall6":                            "internal/runtime/syscall/linux",
		"burrow/node.(*Dataplane).switchFrame.func1":                         "burrow/node",
		"0x00000000004a1b2c":                                                 "unnamed",
		"gogo":                                                               "unnamed",
		"type:.eq.[2]interface {}":                                           "type:",
		"github.com/vishvananda/netlink.(*Handle).LinkList":                  "github.com/vishvananda/netlink",
		"burrow/node.(*Dataplane).sealData[burrow/link.SessionKeys]":         "burrow/node",
		"net.(*rawConn).Write":                                               "net",
		"vendor/golang.org/x/net/dns/dnsmessage.(*Parser).Question":          "vendor/golang.org/x/net/dns/dnsmessage",
		"crypto/internal/fips140/aes.encryptBlockAsm.abi0":                   "crypto/internal/fips140/aes",
		"burrow/runtime.Start.gowrap3":                                       "burrow/runtime",
		"burrow/runtime.(*Daemon).newWorker.func1":                           "burrow/runtime",
		"sync/atomic.(*Pointer[go.shape.struct { burrow/node.x int }]).Load": "sync/atomic",
	} {
		if got := goPackage(symbol); got != want {
			t.Errorf("package of %s: %s, want %s", symbol, got, want)
		}
	}
}

func TestAreas(t *testing.T) {
	got := areas(parsePerfReport(flatPerfReport))
	want := []profileArea{
		{"kernel", 21.62},
		{"crypto/internal/fips140/aes/gcm", 20.30},
		{"runtime", 1.88},
		{"burrow/node", 1.73},
		{"burrow/l2", 0.66},
		{"unnamed", 0.04},
	}
	if len(got) != len(want) {
		t.Fatalf("areas %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Area != want[i].Area || math.Abs(got[i].Percent-want[i].Percent) > 1e-9 {
			t.Errorf("area %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestAreaTableListsEitherSidesLargest(t *testing.T) {
	sender := &profileSide{Role: "sender", Label: "a", Entries: []profileEntry{
		{Percent: 60, Kernel: true, Symbol: "do_syscall_64"},
		{Percent: 30, Symbol: "crypto/internal/fips140/aes/gcm.gcmAesEnc.abi0"},
		{Percent: 10, Symbol: "runtime.memmove"},
	}}
	receiver := &profileSide{Role: "receiver", Label: "b", Entries: []profileEntry{
		{Percent: 50, Kernel: true, Symbol: "do_syscall_64"},
		{Percent: 50, Symbol: "burrow/l2.(*Coalescer).addTCP"},
	}}
	want := "| area | sender (a) % | receiver (b) % |\n" +
		"| --- | --- | --- |\n" +
		"| kernel | 60.0 | 50.0 |\n" +
		"| crypto/internal/fips140/aes/gcm | 30.0 | 0.0 |\n" +
		"| runtime | 10.0 | 0.0 |\n" +
		"| burrow/l2 | 0.0 | 50.0 |\n" +
		"| everything else | 0.0 | 0.0 |\n"
	if got := areaTable([]*profileSide{sender, receiver}); got != want {
		t.Errorf("area table:\n%s\nwant:\n%s", got, want)
	}
}
