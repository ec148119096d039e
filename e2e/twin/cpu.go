package twin

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// cpuTime is the CPU time (user and system) a process used so far, read
// from /proc; 0 where that cannot be read. Unlike the rate it does not
// depend on what else the machine runs, so it tells which process bounds
// the twin's rate on a busy machine too.
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// the fields after the command name, which may hold blanks
	_, rest, ok := strings.Cut(string(b), ") ")
	if !ok {
		return 0
	}
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	const ticks = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticks
}

// pid is the metastore's server process, when the twin started it.
func (ms *Metastore) pid() int {
	if ms.work == "" {
		return 0
	}
	b, err := os.ReadFile(filepath.Join(ms.work, "hms.pid"))
	if err != nil {
		return 0
	}
	p, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return p
}

// cpuUse is the CPU time of the twin's processes, by role.
type cpuUse struct{ metastores, proxies, twin time.Duration }

func (r *runner) cpuUse() cpuUse {
	var u cpuUse
	for _, st := range r.stores {
		u.metastores += cpuTime(st.ms.pid())
	}
	for _, n := range r.fleet.Nodes {
		if n.cmd != nil && n.cmd.Process != nil {
			u.proxies += cpuTime(n.cmd.Process.Pid)
		}
	}
	u.twin = cpuTime(os.Getpid())
	return u
}

// perOp is the CPU each role spent per operation between two readings.
func (u cpuUse) perOp(before cpuUse, ops int) string {
	if ops == 0 {
		return ""
	}
	ms := func(d time.Duration) string {
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)/float64(ops))
	}
	return fmt.Sprintf("CPU per operation: metastore %s, proxies %s, twin %s\n",
		ms(u.metastores-before.metastores), ms(u.proxies-before.proxies), ms(u.twin-before.twin))
}
