package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// commandsTotal counts what the embedded store is asked, by command name
// (find, insert, update, ...): the store's share of a request's cost, and
// what `make bench-rest` reports per REST call.
var commandsTotal = promauto.NewCounterVec(prometheus.CounterOpts{
	Name: "dcm_store_commands_total",
	Help: "Commands the embedded store's serializer forwarded, by command name.",
}, []string{"command"})

const (
	opQuery        = 2004
	opMsg          = 2013
	flagMoreToCome = 1 << 1
	maxMessage     = 48 << 20 // MongoDB's maxMessageSizeBytes
)

// Serializer is a MongoDB wire-protocol proxy that forwards one write (and
// its reply) at a time to a backend, whatever number of clients and
// connections are open. It exists because the embedded FerretDB's updates are
// not atomic under concurrency: two conditional updates of one document
// may both pass their condition. Reads (find, count, aggregate, getMore,
// ...: readCommands) need no such guard: SQLite (in WAL mode, as FerretDB
// opens it) gives each statement a consistent snapshot, so a read sees a
// document before or after a write, never half of one. Reads therefore go
// through at once, beside each other and beside the one write in flight.
type Serializer struct {
	ln      net.Listener
	backend func() (string, error)

	op sync.Mutex // held by a write from its request's first byte to its reply's last

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// NewSerializer listens on the unix socket path (mode 0600) and forwards to
// the unix socket backend returns at each new connection (so the backend
// may restart).
func NewSerializer(path string, backend func() (string, error)) (*Serializer, error) {
	ln, err := listenUnix(path)
	if err != nil {
		return nil, fmt.Errorf("serializer: %w", err)
	}
	s := &Serializer{ln: ln, backend: backend, conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Addr is the socket path clients connect to.
func (s *Serializer) Addr() string { return s.ln.Addr().String() }

// Close stops accepting and closes every open connection.
func (s *Serializer) Close() error {
	err := s.ln.Close()
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

// track records an open connection so Close can end it; a connection
// opened while closing is closed at once.
func (s *Serializer) track(c net.Conn, add bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case add && s.closed:
		_ = c.Close()
	case add:
		s.conns[c] = struct{}{}
	default:
		delete(s.conns, c)
	}
}

func (s *Serializer) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serve(c)
		}()
	}
}

// serve relays one client connection over its own backend connection. The
// request is read whole before the lock is taken, and the reply read whole
// before it is released, so a slow client never holds up the others.
func (s *Serializer) serve(client net.Conn) {
	defer func() { _ = client.Close() }()
	addr, err := s.backend()
	if err != nil {
		return
	}
	backend, err := net.Dial("unix", addr)
	if err != nil {
		return
	}
	defer func() { _ = backend.Close() }()
	s.track(client, true)
	s.track(backend, true)
	defer s.track(client, false)
	defer s.track(backend, false)

	for {
		req, err := readMessage(client)
		if err != nil {
			return
		}
		name := commandName(req)
		commandsTotal.WithLabelValues(name).Inc()
		replies, err := s.roundTrip(backend, req, !isRead(name, req))
		if err != nil {
			return
		}
		for _, r := range replies {
			if _, err := client.Write(r); err != nil {
				return
			}
		}
	}
}

// roundTrip sends req and reads its replies; a write holds the lock
// throughout, so writes reach the backend one at a time.
func (s *Serializer) roundTrip(backend net.Conn, req []byte, write bool) ([][]byte, error) {
	if write {
		s.op.Lock()
		defer s.op.Unlock()
	}
	if _, err := backend.Write(req); err != nil {
		return nil, err
	}
	if !expectsReply(req) {
		return nil, nil
	}
	var replies [][]byte
	for {
		r, err := readMessage(backend)
		if err != nil {
			return nil, err
		}
		replies = append(replies, r)
		if !moreToCome(r) {
			return replies, nil
		}
	}
}

func readMessage(r io.Reader) ([]byte, error) {
	var hdr [16]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := int(binary.LittleEndian.Uint32(hdr[:4]))
	if n < 16 || n > maxMessage {
		return nil, errors.New("wire message length out of range")
	}
	msg := make([]byte, n)
	copy(msg, hdr[:])
	if _, err := io.ReadFull(r, msg[16:]); err != nil {
		return nil, err
	}
	return msg, nil
}

func isMsgWithFlag(m []byte, flag uint32) bool {
	return len(m) >= 20 && binary.LittleEndian.Uint32(m[12:16]) == opMsg &&
		binary.LittleEndian.Uint32(m[16:20])&flag != 0
}

// expectsReply is false only for an OP_MSG sent with moreToCome (an
// unacknowledged write): the server answers nothing.
func expectsReply(req []byte) bool { return !isMsgWithFlag(req, flagMoreToCome) }

// moreToCome marks an exhaust reply that further replies follow.
func moreToCome(reply []byte) bool { return isMsgWithFlag(reply, flagMoreToCome) }

// commandName is the name of the command in a request: the first key of
// an OP_MSG's body section ("find", "insert", "update", ...), "query" for
// a legacy OP_QUERY (the driver's first handshake) and "unknown" for what
// cannot be read.
func commandName(m []byte) string {
	if len(m) < 16 {
		return "unknown"
	}
	switch binary.LittleEndian.Uint32(m[12:16]) {
	case opQuery:
		return "query"
	case opMsg:
	default:
		return "unknown"
	}
	for i := 20; i < len(m); {
		kind := m[i]
		i++
		if i+4 > len(m) {
			break
		}
		n := int(binary.LittleEndian.Uint32(m[i : i+4]))
		if kind == 0 {
			// A BSON document: length, then elements (type byte, name\x00, ...).
			if n < 5 || i+n > len(m) {
				break
			}
			doc := m[i+5 : i+n]
			if end := bytes.IndexByte(doc, 0); end > 0 {
				return string(doc[:end])
			}
			break
		}
		if n < 4 {
			break
		}
		i += n // a document sequence (kind 1): its size counts itself
	}
	return "unknown"
}

// readCommands change nothing in the database: they need not wait for a
// write. Every other command (insert, update, delete, findAndModify,
// create, drop, createIndexes, ...) and anything unreadable is a write.
var readCommands = map[string]bool{
	"find": true, "count": true, "aggregate": true, "getMore": true, "distinct": true,
	"listCollections": true, "listIndexes": true, "listDatabases": true,
	"dbStats": true, "collStats": true, "dataSize": true, "explain": true, "killCursors": true,
	"hello": true, "isMaster": true, "ismaster": true, "ping": true, "buildInfo": true,
	"getParameter": true, "serverStatus": true, "connectionStatus": true, "whatsmyuri": true,
	"hostInfo": true, "getCmdLineOpts": true, "getLog": true, "endSessions": true,
}

// isRead reports whether req, whose command is name, only reads. An
// aggregation that writes its result ($out, $merge) is a write.
func isRead(name string, req []byte) bool {
	if name == "aggregate" {
		return !bytes.Contains(req, []byte("$out")) && !bytes.Contains(req, []byte("$merge"))
	}
	return readCommands[name]
}
