package storeserver_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/dcm-project/dcm/platform/store/storeserver"
	"github.com/dcm-project/dcm/platform/store/storetest"
)

func connect(t *testing.T, s *storeserver.Server, role string) *mongo.Database {
	t.Helper()
	b, err := os.ReadFile(s.URIFile(role))
	require.NoError(t, err)
	c, err := mongo.Connect(options.Client().ApplyURI(strings.TrimSpace(string(b))).SetServerSelectionTimeout(10 * time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Disconnect(context.Background()) })
	return c.Database("dcm")
}

// TestServiceUsersHoldOnlyTheirCollections: each service's user reads and
// writes its own collections and is refused another service's and a new
// one; the all-in-one user has both; the files holding passwords and
// URIs are 0600; PostgreSQL does not run as root; no log holds a password.
func TestServiceUsersHoldOnlyTheirCollections(t *testing.T) {
	users := []storeserver.User{{Service: "core", Collections: []string{"projects", "tokens"}},
		{Service: "rsync", Collections: []string{"clusters"}}}
	s := storetest.Server(t, users)
	ctx := context.Background()
	insert := func(db *mongo.Database, coll, id string) error {
		_, err := db.Collection(coll).InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "version", Value: int64(1)}, {Key: "body", Value: "b"}})
		return err
	}
	find := func(db *mongo.Database, coll string) error {
		return db.Collection(coll).FindOne(ctx, bson.D{{Key: "_id", Value: "a"}}).Err()
	}
	core, rsync, all := connect(t, s, "dcm-core"), connect(t, s, "dcm-rsync"), connect(t, s, storeserver.AllInOneRole)

	require.NoError(t, insert(core, "projects", "a"))
	require.NoError(t, find(core, "projects"))
	_, err := core.Collection("projects").UpdateOne(ctx, bson.D{{Key: "_id", Value: "a"}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "version", Value: int64(2)}}}})
	require.NoError(t, err)
	require.NoError(t, insert(rsync, "clusters", "a"))

	require.ErrorContains(t, insert(core, "clusters", "b"), "permission denied", "core may not write rsync's collection")
	require.ErrorContains(t, find(core, "clusters"), "permission denied", "nor read it")
	require.ErrorContains(t, find(rsync, "projects"), "permission denied")
	require.ErrorContains(t, insert(core, "undeclared", "a"), "permission denied", "no user makes a collection")

	require.NoError(t, insert(all, "clusters", "c"))
	require.NoError(t, find(all, "projects"))

	// The version guard: an update that does not raise the version of a
	// versioned document (not a stamp: it has more than _id and version) is
	// refused (FerretDB sends no UPDATE for one that changes nothing).
	_, err = all.Collection("projects").UpdateOne(ctx, bson.D{{Key: "_id", Value: "a"}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "version", Value: int64(2)}, {Key: "body", Value: "c"}}}})
	require.ErrorContains(t, err, "dcm: write conflict")

	b, err := os.ReadFile(s.URIFile("dcm-core"))
	require.NoError(t, err)
	wrong := strings.Replace(strings.TrimSpace(string(b)), "dcm-core:", "dcm-core:x", 1)
	c, err := mongo.Connect(options.Client().ApplyURI(wrong).SetServerSelectionTimeout(5 * time.Second))
	require.NoError(t, err)
	defer func() { _ = c.Disconnect(ctx) }()
	require.Error(t, c.Database("dcm").Collection("projects").FindOne(ctx, bson.D{}).Err(), "a wrong password is refused")

	var passwords []string
	root := filepath.Dir(s.URIFile("dcm-core"))
	require.NoError(t, filepath.Walk(filepath.Dir(root), func(path string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		if strings.HasSuffix(path, ".password") || strings.HasSuffix(path, ".uri") || strings.HasSuffix(path, ".key") {
			require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), path)
		}
		if strings.HasSuffix(path, ".password") {
			pw, err := os.ReadFile(path)
			require.NoError(t, err)
			passwords = append(passwords, strings.TrimSpace(string(pw)))
		}
		return nil
	}))
	require.Len(t, passwords, 4, "admin, all-in-one, core, rsync")
	logs, err := filepath.Glob(filepath.Join(filepath.Dir(root), "log", "*"))
	require.NoError(t, err)
	require.NotEmpty(t, logs)
	for _, l := range logs {
		b, err := os.ReadFile(l)
		require.NoError(t, err)
		for _, pw := range passwords {
			require.NotContains(t, string(b), pw, "a password in %s", l)
		}
	}
	pid := s.PostgresPID()
	status, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	require.NoError(t, err)
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "Uid:") {
			require.NotEqual(t, "0", strings.Fields(line)[1], "PostgreSQL runs as a user of its own")
		}
	}
}

// TestHostIsAnAddressOfThisMachine: FerretDB listens only on an IP address
// of this machine's interfaces; a name or another machine's address is
// refused before anything is made (no PostgreSQL needed).
func TestHostIsAnAddressOfThisMachine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ host, want string }{
		{"localhost", "not a name"},
		{"203.0.113.77", "no address of this machine"}, // TEST-NET-3
		{"10.255.255.254:27017", "not a name"},
	} {
		t.Run(tc.host, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "server")
			_, err := storeserver.New(storeserver.Config{Dir: dir, Host: tc.host})
			require.ErrorContains(t, err, tc.want)
			_, statErr := os.Stat(dir)
			require.True(t, os.IsNotExist(statErr), "nothing made for a refused host")
		})
	}
}
