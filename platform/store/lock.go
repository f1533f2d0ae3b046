package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockFile names the embedded store's lock in its directory.
const lockFile = "store.lock"

// dirLock is the lock of an embedded store's directory: one program at a
// time, so two programs on one data directory never both drive the same
// clusters. It is an flock on a file in the directory that names the
// holder's pid; the kernel drops it when the holder exits, even on kill -9.
type dirLock struct{ f *os.File }

// lockDir takes dir's lock at once, or says which pid holds it.
func lockDir(dir string) (*dirLock, error) {
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("embedded store lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("the embedded store in %s is in use by pid %s (another DCM program on this data directory): stop it, or give this one another DCM_DATA_DIR", dir, holder(path))
		}
		return nil, fmt.Errorf("embedded store lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dirLock{f: f}, nil
}

// holder is the pid the lock file names ("unknown" if it names none).
func holder(path string) string {
	b, err := os.ReadFile(path)
	if pid := strings.TrimSpace(string(b)); err == nil && pid != "" {
		return pid
	}
	return "unknown"
}

// unlock releases the lock (the file stays; the next holder rewrites it).
func (l *dirLock) unlock() {
	if l != nil && l.f != nil {
		_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
		_ = l.f.Close()
		l.f = nil
	}
}
