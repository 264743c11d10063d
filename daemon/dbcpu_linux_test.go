package daemon

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// databaseCPU returns the CPU time the PostgreSQL server this process
// started (internal/pgtest) has used: its postmaster's, its backends'
// and what its exited children used, from /proc, to 10 ms (a clock
// tick). It is 0 when there is none.
func databaseCPU() time.Duration {
	stats := map[int][]string{} // pid → the fields of /proc/pid/stat after comm
	paths, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || !strings.Contains(s[:i], "(postgres") {
			continue
		}
		pid, _ := strconv.Atoi(strings.Fields(s[:i])[0])
		stats[pid] = strings.Fields(s[i+1:])
	}
	// Fields after comm, from 0: state, ppid, …, utime (11), stime,
	// cutime, cstime (14).
	ticks := func(f []string, from, to int) (n int64) {
		for i := from; i <= to; i++ {
			v, _ := strconv.ParseInt(f[i], 10, 64)
			n += v
		}
		return n
	}
	var total int64
	self := strconv.Itoa(os.Getpid())
	for pid, f := range stats {
		if f[1] != self {
			continue
		}
		total += ticks(f, 11, 14) // the postmaster, and its reaped children
		for _, g := range stats {
			if g[1] == strconv.Itoa(pid) {
				total += ticks(g, 11, 12)
			}
		}
	}
	return time.Duration(total) * (time.Second / 100) // USER_HZ
}
