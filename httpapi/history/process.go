package history

import (
	"bytes"
	"os"
	"strconv"
)

// ReadProcess reads this process's CPU time (getrusage, on Unix systems)
// and resident memory (VmRSS of /proc/self/status, on Linux). What the
// system does not tell is zero.
func ReadProcess() Process {
	p := cpuTimes()
	p.RSS = readRSS("/proc/self/status")
	return p
}

// readRSS returns the VmRSS line of a /proc status file in bytes, or 0.
func readRSS(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return parseRSS(b)
}

// parseRSS finds "VmRSS:   1234 kB" in the text of a /proc status file
// and returns it in bytes, or 0 when there is no such line.
func parseRSS(status []byte) int64 {
	for line := range bytes.Lines(status) {
		rest, ok := bytes.CutPrefix(line, []byte("VmRSS:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil || kb < 0 {
			return 0
		}
		return kb << 10
	}
	return 0
}
