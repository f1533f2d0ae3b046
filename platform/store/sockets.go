package store

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// privateDir makes dir if needed and makes sure only this program's user
// can enter it: it must be a directory of this user, and is set to 0700 if
// it was anything else.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s belongs to user %d, not to this program's user %d", dir, st.Uid, os.Geteuid())
	}
	if fi.Mode().Perm() != 0o700 {
		return os.Chmod(dir, 0o700)
	}
	return nil
}

// socketPathOK reports whether the sockets fit in dir: short enough for
// sun_path, and free of ':' (the driver would read a port after it).
func socketPathOK(dir string) bool {
	longest := filepath.Join(dir, backendSocket)
	return len(longest) <= maxSocketPath && !strings.Contains(longest, ":")
}

// shortPrivateDir makes a fresh 0700 directory whose socket paths fit:
// under TMPDIR, or /tmp when TMPDIR's path is too long itself.
func shortPrivateDir() (string, error) {
	for _, parent := range []string{os.TempDir(), "/tmp"} {
		dir, err := os.MkdirTemp(parent, "dcm-store-")
		if err != nil {
			continue
		}
		if socketPathOK(dir) {
			return dir, nil
		}
		_ = os.Remove(dir)
	}
	return "", errors.New("neither TMPDIR nor /tmp gives a short enough one: use a shorter DCM_DATA_DIR")
}

// listenUnix listens on the socket path, mode 0600, replacing a socket a
// stopped program left behind but never one that still answers.
func listenUnix(path string) (net.Listener, error) {
	if err := removeStaleSocket(path); err != nil {
		return nil, err
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		_ = ln.Close()
		return nil, err
	}
	return ln, nil
}

// removeStaleSocket removes the socket at path unless something answers
// on it: another program serving the same store.
func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("%s exists and is not a socket", path)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		_ = c.Close()
		return fmt.Errorf("%s is in use: another program serves this embedded store", path)
	}
	return os.Remove(path)
}
