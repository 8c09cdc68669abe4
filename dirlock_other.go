//go:build !unix

package queen

import "os"

// lockDir opens dir. Without flock there is no lock to take: a
// restore cannot tell a running restore's directory from a dead one's,
// so none is removed (see dirLocksWork).
func lockDir(dir string) (*os.File, error) { return os.Open(dir) }

// dirLocksWork: on this system nothing tells a running restore from a
// dead one.
const dirLocksWork = false
