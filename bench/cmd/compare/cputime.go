package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// cpuClock reads the CPU time (user + system) a process has used so far:
// pid 0 is this process (getrusage), another pid a child such as cmd/queen
// (/proc/pid/stat, in clock ticks of 10 ms).
func cpuClock(pid int) (time.Duration, error) {
	if pid == 0 {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			return 0, err
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The fields after the command name, which is in parentheses and
	// may hold spaces: state is the first, utime the 12th, stime the 13th.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := bytes.Fields(data[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ut, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	st, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q stime %q", pid, f[11], f[12])
	}
	const tick = 10 * time.Millisecond // USER_HZ, 100 on Linux
	return time.Duration(ut+st) * tick, nil
}

// cpuMeter measures the CPU a phase costs the client (this process) and,
// when the server runs in its own process, the server.
type cpuMeter struct {
	pid            int
	client, server time.Duration
	ok             bool
}

func startCPU(e *httpEnv) *cpuMeter {
	m := &cpuMeter{}
	if e.proc != nil {
		m.pid = e.proc.Process.Pid
	}
	var err error
	if m.client, err = cpuClock(0); err != nil {
		return m
	}
	if m.pid != 0 {
		if m.server, err = cpuClock(m.pid); err != nil {
			return m
		}
	}
	m.ok = true
	return m
}

// note says the phase's CPU per message: the server's and the client's
// when they are two processes, the one process's otherwise.
func (m *cpuMeter) note(msgs int64) string {
	if !m.ok || msgs <= 0 {
		return ""
	}
	c, err := cpuClock(0)
	if err != nil {
		return ""
	}
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(msgs) }
	if m.pid == 0 {
		return fmt.Sprintf("; CPU %.2f µs/msg (client and server)", per(c-m.client))
	}
	s, err := cpuClock(m.pid)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("; CPU %.2f µs/msg server, %.2f client", per(s-m.server), per(c-m.client))
}
