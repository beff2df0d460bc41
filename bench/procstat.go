package bench

import (
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// atClockTick is AT_CLKTCK from <elf.h>: the auxiliary-vector entry where
// the kernel tells a program the tick rate of /proc times, which is what
// sysconf(_SC_CLK_TCK) returns.
const atClockTick = 17

// clockTicksPerSecond is the unit of utime and stime in /proc/PID/stat.
var clockTicksPerSecond = readClockTicks()

// readClockTicks reads AT_CLKTCK from /proc/self/auxv, falling back to 100,
// the USER_HZ of every Linux architecture Go runs on.
func readClockTicks() float64 {
	const fallback = 100
	data, err := os.ReadFile("/proc/self/auxv")
	if err != nil {
		return fallback
	}
	for i := 0; i+16 <= len(data); i += 16 {
		key := binary.NativeEndian.Uint64(data[i:])
		value := binary.NativeEndian.Uint64(data[i+8:])
		if key == atClockTick && value > 0 {
			return float64(value)
		}
	}
	return fallback
}

// parseStatTicks returns utime+stime, in clock ticks, from the content of
// /proc/PID/stat. The command name in parentheses may hold spaces and
// parentheses itself, so fields are counted from the last ')'.
func parseStatTicks(stat string) (uint64, error) {
	end := strings.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, fmt.Errorf("no command name in /proc stat line %q", stat)
	}
	// After the name come field 3 (state) onwards; utime and stime are
	// fields 14 and 15.
	fields := strings.Fields(stat[end+1:])
	const utime, stime = 14 - 3, 15 - 3
	if len(fields) <= stime {
		return 0, fmt.Errorf("short /proc stat line %q", stat)
	}
	u, err := strconv.ParseUint(fields[utime], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("utime in /proc stat line: %w", err)
	}
	s, err := strconv.ParseUint(fields[stime], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stime in /proc stat line: %w", err)
	}
	return u + s, nil
}

// cpuSeconds returns the CPU time (user and system, all threads) the
// process has used so far.
func cpuSeconds(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	ticks, err := parseStatTicks(string(data))
	if err != nil {
		return 0, fmt.Errorf("process %d: %w", pid, err)
	}
	return float64(ticks) / clockTicksPerSecond, nil
}

// parseMachineBusyTicks returns the clock ticks all CPUs together have
// spent busy, from the content of /proc/stat: the "cpu" line's user, nice,
// system, irq, softirq and steal, leaving out idle and iowait. guest and
// guest_nice are left out too, since user and nice already count them.
// Unlike a process's utime and stime, this counts the kernel's softirq
// work, which runs on whatever thread it interrupts, or in ksoftirqd.
func parseMachineBusyTicks(stat string) (uint64, error) {
	for line := range strings.Lines(stat) {
		fields := strings.Fields(line)
		if len(fields) == 0 || fields[0] != "cpu" {
			continue
		}
		// user nice system idle iowait irq softirq steal
		const user, nice, system, irq, softirq, steal = 1, 2, 3, 6, 7, 8
		if len(fields) <= steal {
			return 0, fmt.Errorf("short /proc/stat cpu line %q", strings.TrimSpace(line))
		}
		var busy uint64
		for _, i := range []int{user, nice, system, irq, softirq, steal} {
			v, err := strconv.ParseUint(fields[i], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/stat cpu line: %w", err)
			}
			busy += v
		}
		return busy, nil
	}
	return 0, fmt.Errorf("no cpu line in /proc/stat")
}

// machineBusySeconds returns the CPU time all CPUs of the machine have
// spent busy so far (parseMachineBusyTicks), whoever spent it.
func machineBusySeconds() (float64, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	ticks, err := parseMachineBusyTicks(string(data))
	if err != nil {
		return 0, err
	}
	return float64(ticks) / clockTicksPerSecond, nil
}

// parseMemoryField returns a memory field, in bytes, of /proc/PID/status
// (VmHWM, the peak resident set size, or VmRSS, the current one), of
// /proc/PID/smaps_rollup (Pss) or of /proc/meminfo (MemAvailable): lines
// such as "VmRSS:   12000 kB".
func parseMemoryField(text, field string) (uint64, error) {
	for line := range strings.Lines(text) {
		value, ok := strings.CutPrefix(line, field+":")
		if !ok {
			continue
		}
		fields := strings.Fields(value)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("unexpected %s line %q", field, strings.TrimSpace(line))
		}
		kb, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", field, err)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("no %s line", field)
}

// memoryField reads a memory field of the process's /proc/PID/<file>.
func memoryField(pid int, file, field string) (uint64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
	if err != nil {
		return 0, err
	}
	bytes, err := parseMemoryField(string(data), field)
	if err != nil {
		return 0, fmt.Errorf("process %d: %w", pid, err)
	}
	return bytes, nil
}

// peakRSS returns the process's peak resident set size in bytes.
func peakRSS(pid int) (uint64, error) { return memoryField(pid, "status", "VmHWM") }

// residentRSS returns the process's resident set size now, in bytes.
func residentRSS(pid int) (uint64, error) { return memoryField(pid, "status", "VmRSS") }

// proportionalRSS returns the process's proportional set size in bytes:
// its resident memory with each page shared with other processes (the
// binary's code, say) divided among them, so that the PSS of many
// processes adds up to the memory they take together.
func proportionalRSS(pid int) (uint64, error) { return memoryField(pid, "smaps_rollup", "Pss") }

// openFiles counts the process's open file descriptors.
func openFiles(pid int) (int, error) {
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(entries), err
}
