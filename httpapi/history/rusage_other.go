//go:build !unix

package history

// cpuTimes returns zeros where getrusage does not exist.
func cpuTimes() Process { return Process{} }
