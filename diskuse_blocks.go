//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package queen

import (
	"os"
	"syscall"
)

// allocated is the space fi takes on disk: its allocated 512-byte blocks.
func allocated(fi os.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int64(st.Blocks) * 512
	}
	return fi.Size()
}
