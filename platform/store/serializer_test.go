package store

import (
	"encoding/binary"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// opMsgOf is an OP_MSG carrying command {name: 1}.
func opMsgOf(t *testing.T, name string) []byte {
	t.Helper()
	doc, err := bson.Marshal(bson.D{{Key: name, Value: 1}})
	require.NoError(t, err)
	m := make([]byte, 21, 21+len(doc))
	binary.LittleEndian.PutUint32(m[12:16], opMsg)
	m[20] = 0 // section kind 0: the body
	m = append(m, doc...)
	binary.LittleEndian.PutUint32(m[0:4], uint32(len(m)))
	return m
}

// heldBackend answers every request with an empty OP_MSG, but holds its
// reply to a write until release is closed, telling arrived which
// command it got.
func heldBackend(t *testing.T, dir string, arrived chan<- string, release <-chan struct{}) string {
	t.Helper()
	path := filepath.Join(dir, "backend.sock")
	ln, err := net.Listen("unix", path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				for {
					req, err := readMessage(c)
					if err != nil {
						return
					}
					name := commandName(req)
					arrived <- name
					if !isRead(name, req) {
						<-release
					}
					reply := opMsgOf(t, "ok")
					binary.LittleEndian.PutUint32(reply[8:12], binary.LittleEndian.Uint32(req[4:8]))
					if _, err := c.Write(reply); err != nil {
						return
					}
				}
			}()
		}
	}()
	return path
}

// TestSerializerReadsPassHeldWrite: while one write is held at the
// backend, a read on another connection gets its answer, and a second
// write waits until the first is done (FerretDB's updates are not atomic
// among themselves).
func TestSerializerReadsPassHeldWrite(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "ser") // short: unix socket paths are limited
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	arrived, release := make(chan string, 10), make(chan struct{})
	backend := heldBackend(t, dir, arrived, release)
	s, err := NewSerializer(filepath.Join(dir, "s.sock"), func() (string, error) { return backend, nil })
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })

	send := func(name string) <-chan error {
		done := make(chan error, 1)
		c, err := net.Dial("unix", s.Addr())
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		go func() {
			if _, err := c.Write(opMsgOf(t, name)); err != nil {
				done <- err
				return
			}
			_, err := readMessage(c)
			done <- err
		}()
		return done
	}
	const deadline = 10 * time.Second

	firstWrite := send("update")
	require.Equal(t, "update", <-arrived, "the first write reaches the backend, which holds it")
	read := send("find")
	select {
	case err := <-read:
		require.NoError(t, err, "the read is answered while the write is held")
	case <-time.After(deadline):
		t.Fatal("a read waited behind a held write")
	}
	require.Equal(t, "find", <-arrived)

	secondWrite := send("insert")
	for range 3 { // the second write must not get to the backend meanwhile
		select {
		case got := <-arrived:
			t.Fatalf("%s reached the backend while another write was held", got)
		case err := <-secondWrite:
			t.Fatalf("the second write was answered while the first was held: %v", err)
		default:
		}
		require.NoError(t, <-send("count"))
		require.Equal(t, "count", <-arrived)
	}
	close(release)
	require.NoError(t, <-firstWrite)
	require.Equal(t, "insert", <-arrived, "the second write goes once the first is done")
	require.NoError(t, <-secondWrite)
}

func TestCommandName(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"find", "insert", "getMore", "aggregate"} {
		require.Equal(t, name, commandName(opMsgOf(t, name)))
	}
	require.Equal(t, "unknown", commandName([]byte{1, 2, 3}))
	require.True(t, isRead("find", opMsgOf(t, "find")))
	require.False(t, isRead("update", opMsgOf(t, "update")))
	require.False(t, isRead("findAndModify", opMsgOf(t, "findAndModify")))
	require.False(t, isRead("aggregate", append(opMsgOf(t, "aggregate"), "$merge"...)), "an aggregation that writes is a write")
}
