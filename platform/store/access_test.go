package store_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/platform/store/storetest"
)

func openDir(t *testing.T, dataDir string) *store.Store {
	t.Helper()
	s, err := store.Open(store.Config{Database: "access", DataDir: dataDir, Keyring: storetest.Keyring(t)}, zap.NewNop())
	require.NoError(t, err)
	return s
}

// socketOf is the socket path in an embedded store's URI.
func socketOf(t *testing.T, uri string) string {
	t.Helper()
	host := strings.TrimSuffix(strings.TrimPrefix(uri, "mongodb://"), "/?serverMonitoringMode=poll")
	path, err := url.QueryUnescape(host)
	require.NoError(t, err)
	return path
}

// requirePrivate: dir is a 0700 directory of this user, the socket in it a
// 0600 socket of this user.
func requirePrivate(t *testing.T, dir, socket string) {
	t.Helper()
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), "socket directory mode")
	fi, err = os.Lstat(socket)
	require.NoError(t, err)
	require.Equal(t, os.ModeSocket, fi.Mode().Type())
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "socket mode")
	require.Equal(t, uint32(os.Geteuid()), fi.Sys().(*syscall.Stat_t).Uid)
	require.Equal(t, dir, filepath.Dir(socket))
}

// TestEmbeddedStoreIsPrivate: the embedded store listens on no TCP port,
// only on unix sockets (0600) in its data directory, which is forced to
// 0700 if it was more open. We run as root, so that another user is kept
// out is left to the kernel's permission check of those modes; what is
// tested is the modes and that no TCP listener remains.
func TestEmbeddedStoreIsPrivate(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	dir := filepath.Join(data, "store")
	require.NoError(t, os.Mkdir(dir, 0o755))
	s := openDir(t, data)
	defer s.Close(context.Background())

	uri := s.ClientURI()
	require.Equal(t, uri, s.Embedded().URI())
	sock := socketOf(t, uri)
	require.Equal(t, filepath.Join(dir, "dcm.sock"), sock, "the URI names a socket path, no TCP host")
	require.Equal(t, dir, s.Embedded().SocketDir())
	requirePrivate(t, dir, sock)
	requirePrivate(t, dir, filepath.Join(dir, "ferretdb.sock"))
	requireNoTCPListener(t)

	// A program of the same user can share the store through the URI.
	c, err := mongo.Connect(options.Client().ApplyURI(uri))
	require.NoError(t, err)
	defer func() { _ = c.Disconnect(context.Background()) }()
	require.NoError(t, c.Ping(context.Background(), nil))

	// A second store on the same directory is refused at once while this
	// one runs, naming the holder.
	_, err = store.Open(store.Config{Database: "access", DataDir: data, Keyring: storetest.Keyring(t)}, zap.NewNop())
	require.ErrorContains(t, err, fmt.Sprintf("in use by pid %d", os.Getpid()))

	// Outage and recovery keep the same socket and its mode.
	s.Embedded().StopBackend()
	require.NoError(t, s.Embedded().StartBackend())
	requirePrivate(t, dir, filepath.Join(dir, "ferretdb.sock"))
}

// TestEmbeddedStoreLongPath: a data directory too deep for a socket path
// puts the sockets in a fresh private directory, removed at Close; a
// socket left by a program that stopped is replaced.
func TestEmbeddedStoreLongPath(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))
	s := openDir(t, data)
	sockDir := s.Embedded().SocketDir()
	require.NotEqual(t, filepath.Join(data, "store"), sockDir)
	require.LessOrEqual(t, len(filepath.Join(sockDir, "ferretdb.sock")), 103)
	requirePrivate(t, sockDir, socketOf(t, s.ClientURI()))
	recs := store.NewRecords(s, "things", "thing", func() *structpb.Struct { return &structpb.Struct{} })
	require.NoError(t, recs.Create(context.Background(), "a", "", newStruct(t, nil)))
	s.Close(context.Background())
	_, err := os.Stat(sockDir)
	require.True(t, os.IsNotExist(err), "the sockets' directory is removed at Close")

	short := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(short, "store"), 0o700))
	l, err := (&net.ListenConfig{}).Listen(context.Background(), "unix", filepath.Join(short, "store", "dcm.sock"))
	require.NoError(t, err)
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	require.NoError(t, l.Close())
	s = openDir(t, short)
	defer s.Close(context.Background())
	requirePrivate(t, filepath.Join(short, "store"), socketOf(t, s.ClientURI()))
}

// requireNoTCPListener fails if this process has a listening TCP socket
// (Linux: its socket inodes against /proc/net/tcp{,6}). The store tests
// start no other listener.
func requireNoTCPListener(t *testing.T) {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Log("no /proc: TCP listeners not checked")
		return
	}
	mine := map[string]bool{}
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.HasPrefix(target, "socket:[") {
			mine[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] = true
		}
	}
	for _, table := range []string{"/proc/self/net/tcp", "/proc/self/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			cols := strings.Fields(sc.Text())
			// sl local rem st ... inode: st 0A is LISTEN, the inode is column 10.
			if len(cols) > 9 && cols[3] == "0A" && mine[cols[9]] {
				t.Errorf("this process listens on TCP %s (%s)", cols[1], table)
			}
		}
		_ = f.Close()
	}
}
