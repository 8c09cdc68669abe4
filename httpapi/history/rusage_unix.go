//go:build unix

package history

import (
	"syscall"
	"time"
)

// cpuTimes returns the process's user and system CPU time so far.
func cpuTimes() Process {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return Process{}
	}
	return Process{
		CPUUser:   time.Duration(ru.Utime.Nano()),
		CPUSystem: time.Duration(ru.Stime.Nano()),
	}
}
