package catalog

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// allocate gives f size allocated bytes: fallocate(2), which allocates the
// blocks without writing them, or zeros written where the file system does
// not support it.
func allocate(f *os.File, size int64) error {
	err := unix.Fallocate(int(f.Fd()), 0, 0, size)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		return writeZeros(f, size)
	}
	if err != nil {
		return &os.PathError{Op: "fallocate", Path: f.Name(), Err: err}
	}
	return nil
}

// freeBytes returns the bytes available to the process on the file system
// holding path, and whether it could tell.
func freeBytes(path string) (int64, bool) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, false
	}
	return int64(st.Bavail) * st.Bsize, true
}
