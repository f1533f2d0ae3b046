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

// Serializer is a MongoDB wire-protocol proxy that forwards one request (and
// its reply) at a time to a backend, whatever number of clients and
// connections are open. It exists because the embedded FerretDB's updates are
// not atomic under concurrency.
type Serializer struct {
	ln      net.Listener
	backend func() (string, error)

	op sync.Mutex // held from a request's first byte to its reply's last

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
		commandsTotal.WithLabelValues(commandName(req)).Inc()
		replies, err := s.roundTrip(backend, req)
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

func (s *Serializer) roundTrip(backend net.Conn, req []byte) ([][]byte, error) {
	s.op.Lock()
	defer s.op.Unlock()
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
