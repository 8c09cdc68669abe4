package queen_test

import (
	"io/fs"
	"os"
	"path/filepath"
)

// walkFiles calls fn with the contents of every regular file under dir.
func walkFiles(dir string, fn func([]byte)) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fn(data)
		return nil
	})
}
