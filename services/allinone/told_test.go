package allinone_test

import (
	"context"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"google.golang.org/grpc"

	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/services/allinone"
	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
)

// rpcCounts counts the unary gRPC calls each method of the all-in-one
// program gets, by full method name.
type rpcCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *rpcCounts) reset() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.n
	c.n = map[string]int{}
	return out
}

// build is allinone.Build with every unary method's handler counting its
// calls.
func (c *rpcCounts) build(ctx context.Context, env *app.Env) ([]server.Service, server.Options, error) {
	svcs, opts, err := allinone.Build(ctx, env)
	for i, s := range svcs {
		svcs[i] = countedService{s, c}
	}
	return svcs, opts, err
}

type countedService struct {
	server.Service
	c *rpcCounts
}

func (s countedService) Register(r grpc.ServiceRegistrar) {
	s.Service.Register(countedRegistrar{r, s.c})
}

type countedRegistrar struct {
	grpc.ServiceRegistrar
	c *rpcCounts
}

func (r countedRegistrar) RegisterService(desc *grpc.ServiceDesc, impl any) {
	d := *desc
	d.Methods = slices.Clone(desc.Methods)
	for i, m := range d.Methods {
		name := "/" + desc.ServiceName + "/" + m.MethodName
		h := m.Handler
		d.Methods[i].Handler = func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			r.c.mu.Lock()
			r.c.n[name]++
			r.c.mu.Unlock()
			return h(srv, ctx, dec, ic)
		}
	}
	r.ServiceRegistrar.RegisterService(&d, impl)
}

// coreCalls are the calls of counts made to core's logical cloud API.
func coreCalls(counts map[string]int) map[string]int {
	out := map[string]int{}
	for m, n := range counts {
		if strings.HasPrefix(m, "/dcm.core.v1.LogicalCloudService/") {
			out[strings.TrimPrefix(m, "/dcm.core.v1.LogicalCloudService/")] = n
		}
	}
	return out
}

func total(counts map[string]int) int {
	n := 0
	for _, v := range counts {
		n += v
	}
	return n
}

func show(counts map[string]int) string {
	var b strings.Builder
	for _, m := range slices.Sorted(maps.Keys(counts)) {
		fmt.Fprintf(&b, "\n  %3d %s", counts[m], m)
	}
	return b.String()
}

// TestChildrenNeverAskCore counts the gRPC calls of one logical cloud
// create (one user, two permissions, one quota) and of one list page of
// logical clouds: core's logical cloud API gets the gateway's one call
// each and nothing else (the namespace, user and quota services check the
// parent against the facts core told them), and the page reads its
// permissions in one call to the user service, whatever its length.
func TestChildrenNeverAskCore(t *testing.T) {
	t.Parallel()
	c := &rpcCounts{n: map[string]int{}}
	s := stacktest.StartWith(t, stacktest.Options{Build: c.build})
	r := apitest.NewREST(t, s)
	r.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"p1"}}`)
	c.reset()
	r.Want(201, "POST", "/v2/projects/p1/logical-clouds", `{"name": "lc-1", "resources": {"cpu": "4"},
	  "user": [{"name": "user-1", "type": "certificate",
	            "permissions": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
	                            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}]}`)
	create := c.reset()
	t.Logf("one create (1 user, 2 permissions, 1 quota): %d calls%s", total(create), show(create))
	require.Equal(t, map[string]int{"CreateLogicalCloud": 1}, coreCalls(create), "no service asked core back")

	for i := 2; i <= 5; i++ {
		r.Want(201, "POST", "/v2/projects/p1/logical-clouds", fmt.Sprintf(`{"name": "lc-%d", "user": [{"name": "u", "type": "certificate"}]}`, i))
	}
	c.reset()
	body := r.Want(200, "GET", "/v2/projects/p1/logical-clouds", "")
	list := c.reset()
	t.Logf("one list page (5 logical clouds): %d calls%s", total(list), show(list))
	require.Contains(t, body, `"permission-name"`, "the page shows the permissions")
	require.Equal(t, map[string]int{"ListLogicalClouds": 1}, coreCalls(list), "no service asked core back")
	perms := 0
	for m, n := range list {
		if strings.HasPrefix(m, "/dcm.user.v1.") {
			perms += n
		}
	}
	require.Equal(t, 1, perms, "one user-service call for the page, not one per logical cloud:%s", show(list))
}

// TestFactsReconcile: a service that lost (or never got) a logical
// cloud's facts answers 404 under it until core's reconcile tells it
// again: on start (a store made before the facts existed is the same
// case) and every DCM_FACTS_INTERVAL.
func TestFactsReconcile(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	s := stacktest.StartWith(t, stacktest.Options{DataDir: dataDir})
	r := apitest.NewREST(t, s)
	r.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"p1"}}`)
	r.Want(201, "POST", "/v2/projects/p1/logical-clouds", `{"name": "lc-1", "resources": {"cpu": "4"}, "user": [{"name": "user-1", "type": "certificate"}]}`)
	lc := "/v2/projects/p1/logical-clouds/lc-1"
	r.Want(200, "GET", lc+"/cluster-quotas", "")
	forget := func(s *stacktest.Stack, service string) {
		res, err := s.Env.Store.Database().Collection(service+"_logical_clouds").DeleteOne(context.Background(), bson.D{{Key: "_id", Value: "p1/lc-1"}})
		require.NoError(t, err)
		require.EqualValues(t, 1, res.DeletedCount, "the %s service kept the facts", service)
	}
	forget(s, "quota")
	r.Want(404, "GET", lc+"/cluster-quotas", "")
	r.Want(404, "POST", lc+"/cluster-quotas", `{"metadata":{"name":"q"},"spec":{"cpu":"1"}}`)
	r.Want(200, "GET", lc+"/users", "") // the others kept theirs

	// Restarted, core tells every logical cloud's facts again.
	s.Stop()
	s = stacktest.StartWith(t, stacktest.Options{DataDir: dataDir, Args: []string{"-facts-interval", "200ms"}})
	r = apitest.NewREST(t, s)
	converged := func(path string) {
		t.Helper()
		require.Eventually(t, func() bool {
			code, _ := apitest.Call(t, s.Admin, "GET", s.URL+path, "")
			return code == 200
		}, 20*time.Second, 50*time.Millisecond, "GET %s never answered 200", path)
	}
	converged(lc + "/cluster-quotas")
	r.Want(201, "POST", lc+"/cluster-quotas", `{"metadata":{"name":"q"},"spec":{"cpu":"1"}}`)

	// And while it runs, every DCM_FACTS_INTERVAL.
	forget(s, "user")
	converged(lc + "/users")
}

// TestChildrenHoldNoCoreClient fails if the namespace, user, quota or
// traffic service (their programs' code, tests aside) imports core's API,
// whose generated client is how a service would ask core: core tells them
// the logical clouds' facts instead. (.golangci.yml's depguard rule
// told-not-asking says the same to make lint.)
func TestChildrenHoldNoCoreClient(t *testing.T) {
	t.Parallel()
	const coreAPI = "github.com/dcm-project/dcm/gen/dcm/core/v1"
	files := 0
	for _, svc := range []string{"namespace", "user", "quota", "traffic"} {
		err := filepath.WalkDir(filepath.Join("..", svc), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			files++
			for _, imp := range f.Imports {
				if p, _ := strconv.Unquote(imp.Path.Value); p == coreAPI {
					t.Errorf("%s imports %s: the %s service must not hold a client of core (core tells it the facts)", path, coreAPI, svc)
				}
			}
			return nil
		})
		require.NoError(t, err)
	}
	require.Greater(t, files, 20, "the services' sources were read")
}
