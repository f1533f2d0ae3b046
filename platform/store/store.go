package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/topology"
	"go.uber.org/zap"

	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/secrets"
)

// Config selects the database. With URI empty, an embedded FerretDB runs
// under DataDir/store.
type Config struct {
	URI      string
	Database string
	DataDir  string
	// Keyring seals and opens records' secrets; nil refuses to store any.
	Keyring *secrets.Keyring
}

// Store is a connected database handle shared by a process's services.
// Each service works on its own view of it (For), which seals with the
// service's keys.
type Store struct {
	client   *mongo.Client
	db       *mongo.Database
	embedded *Embedded
	uri      string
	keyring  *secrets.Keyring
	// service is the name a view was made for (For); "" for the root.
	service string
	// root is the Store a view was made from (nil for the root itself):
	// it owns the connection and the list of collections.
	root *Store

	mu    sync.Mutex
	colls []owned // collections opened by NewRecords: what Rewrap covers
	// opened are the collections each view opened (NewRecords, NewLeases,
	// NewStamps), by its service: what Opened reports.
	opened map[string][]string
	// caches are the read caches of collections declared with CacheReads,
	// by collection (cache.go).
	caches map[string]*readCache
}

// owned is a collection and the keyring of the view that opened it.
type owned struct {
	name    string
	keyring *secrets.Keyring
}

func (s *Store) base() *Store {
	if s.root != nil {
		return s.root
	}
	return s
}

// own records that collection name is sealed with s's keyring. A
// collection belongs to one service: the first view to open it decides.
func (s *Store) own(name string) {
	b := s.base()
	b.mu.Lock()
	defer b.mu.Unlock()
	if !slices.ContainsFunc(b.colls, func(o owned) bool { return o.name == name }) {
		b.colls = append(b.colls, owned{name: name, keyring: s.keyring})
	}
}

// open records that s's service opened collection name.
func (s *Store) open(name string) {
	b := s.base()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.opened == nil {
		b.opened = map[string][]string{}
	}
	if !slices.Contains(b.opened[s.service], name) {
		b.opened[s.service] = append(b.opened[s.service], name)
	}
}

// Opened is every collection opened on the store and its views so far
// (NewRecords, NewLeases, NewStamps), sorted, by the service each view
// was made for (For; "" for the store itself): what each service's
// database user must be allowed to use. Each service declares its
// collections too (docs/store.md is generated from those lists); a test
// compares the two.
func (s *Store) Opened() map[string][]string {
	b := s.base()
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string][]string, len(b.opened))
	for svc, names := range b.opened {
		out[svc] = slices.Sorted(slices.Values(names))
	}
	return out
}

func (s *Store) owned() []owned {
	b := s.base()
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.colls)
}

// For is service's view of the store: the same connection and database,
// sealing and opening secrets with the service's keys (secrets.Keyring.For),
// so that a service cannot open another's values. Records opened on the
// view are rewrapped with those keys by Rewrap. Closing a view does
// nothing; the store it came from owns the connection.
func (s *Store) For(service string) (*Store, error) {
	v := &Store{client: s.client, db: s.db, embedded: s.embedded, uri: s.uri, service: service, root: s.base()}
	if s.keyring != nil {
		k, err := s.keyring.For(service)
		if err != nil {
			return nil, err
		}
		v.keyring = k
	}
	return v, nil
}

// Open connects to cfg.URI, or starts the embedded store when it is empty.
// It does not wait for the server: a store that is down makes requests fail
// with Unavailable until it is back, and the driver reconnects by itself.
func Open(cfg Config, log *zap.Logger) (*Store, error) {
	if cfg.Database == "" {
		return nil, errors.New("store: database name is empty")
	}
	s := &Store{keyring: cfg.Keyring}
	uri := cfg.URI
	if uri == "" {
		e, err := StartEmbedded(filepath.Join(cfg.DataDir, "store"), log)
		if err != nil {
			return nil, err
		}
		s.embedded = e
		uri = e.URI()
	}
	opts := options.Client().ApplyURI(uri).
		SetServerSelectionTimeout(3 * time.Second).
		SetConnectTimeout(3 * time.Second).
		SetAppName("dcm").
		SetMonitor(commandMonitor)
	client, err := mongo.Connect(opts)
	if err != nil {
		s.Close(context.Background())
		// The URI may hold a password: do not echo the driver's message.
		return nil, errors.New("store: invalid MongoDB URI")
	}
	s.client, s.uri = client, uri
	s.db = client.Database(cfg.Database)
	return s, nil
}

// ClientURI is the URI this store was opened with (the serializer's, for
// the embedded store). It may carry credentials: never log it.
func (s *Store) ClientURI() string { return s.uri }

// Database is the handle services open their collections on.
func (s *Store) Database() *mongo.Database { return s.db }

// Embedded is the in-process store, or nil when connected by URI.
func (s *Store) Embedded() *Embedded { return s.embedded }

// Close disconnects and stops the embedded store, if any; on a view (For)
// it does nothing.
func (s *Store) Close(ctx context.Context) {
	if s.root != nil {
		return
	}
	if s.client != nil {
		_ = s.client.Disconnect(ctx)
	}
	if s.embedded != nil {
		s.embedded.Close()
	}
}

// mapErr turns driver errors into domain errors: a store that cannot be
// reached is Unavailable (HTTP 503), never an internal error.
func mapErr(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled):
		return err
	case mongo.IsNetworkError(err), mongo.IsTimeout(err), isServerSelection(err):
		return errs.Unavailable(fmt.Errorf("%s: %w", op, err), "store unavailable, retry later")
	case IsWriteConflict(err):
		return errs.Aborted("%s: another writer changed it first; read it again and retry", op)
	}
	return errs.Internal(fmt.Errorf("%s: %w", op, err), "store error")
}

// writeConflictText starts the message with which the store server
// (platform/store/storeserver, FerretDB on PostgreSQL) refuses an update
// that does not raise a versioned document's version: the loser of a race
// between writers that read the same version.
const writeConflictText = "dcm: write conflict"

// IsWriteConflict reports whether err is the store server's refusal of an
// update that lost a race (writeConflictText). FerretDB reports it as an
// InternalError whose message carries PostgreSQL's. MongoDB and the
// embedded store never send it: their conditional updates match nothing
// instead.
func IsWriteConflict(err error) bool {
	var se mongo.ServerError
	return errors.As(err, &se) && strings.Contains(se.Error(), writeConflictText)
}

func isServerSelection(err error) bool {
	var sse topology.ServerSelectionError
	return errors.As(err, &sse)
}
