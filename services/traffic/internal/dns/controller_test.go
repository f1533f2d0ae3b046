package dns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	"k8s.io/client-go/rest"

	trafficv1 "github.com/dcm-project/dcm/gen/dcm/traffic/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/kubetest/bindtest"
	"github.com/dcm-project/dcm/platform/store/storetest"
)

func zapNop() *zap.Logger { return zap.NewNop() }

func unreachable(_ context.Context, c Cluster) (*rest.Config, error) {
	return nil, fmt.Errorf("cluster %s/%s is unreachable", c.Provider, c.Cluster)
}

func validRun() Run {
	return Run{Intent: "dns", ID: "ms1", ExternalName: "service1.example.com", Provider: "rfc2136",
		Params:      map[string]string{"rfc2136-host": "127.0.0.1", "rfc2136-zone": "example.com", "rfc2136-tsig-keyname": "k"},
		Credentials: map[string]string{"rfc2136-tsig-secret": "c2VjcmV0"},
		Clusters:    []Cluster{{"edge", "c1", "lc1-ns", "g1-dns-reader"}}, Selector: map[string]string{"run": "ms1"}}
}

// allow sets project p's DNS allow-list on c's store: the servers given
// (host:port) and zone example.com.
func allow(t *testing.T, c *Controller, servers ...string) {
	t.Helper()
	_, err := c.allow.Put(context.Background(), "", "p", &trafficv1.DnsAllowList{Servers: servers, Zones: []string{"example.com"}})
	require.NoError(t, err)
}

// noBackoff makes the controllers' clock (one for all) jump a day at each
// reading, so that every pass is due whatever failed before.
func noBackoff(cs ...*Controller) {
	var n atomic.Int64
	for _, c := range cs {
		c.now = func() time.Time { return time.Now().Add(time.Duration(n.Add(1)) * 24 * time.Hour) }
	}
}

func TestSetRefusesBadRuns(t *testing.T) {
	c := New(storetest.Open(t), unreachable, zapNop(), time.Minute)
	ctx := context.Background()
	for field, change := range map[string]func(*Run){
		"runs[0].provider":                                func(r *Run) { r.Provider = "aws" },
		"runs[0].externalName":                            func(r *Run) { r.ExternalName = "" },
		"runs[0].selector":                                func(r *Run) { r.Selector = nil },
		"runs[0].externalDnsParameters.rfc2136-host":      func(r *Run) { delete(r.Params, "rfc2136-host") },
		"runs[0].externalDnsParameters.rfc2136-port":      func(r *Run) { r.Params["rfc2136-port"] = "99999" },
		"runs[0].externalDnsParameters.policy":            func(r *Run) { r.Params["policy"] = "everything" },
		"runs[0].externalDnsParameters.aws-zone-type":     func(r *Run) { r.Params["aws-zone-type"] = "public" },
		"runs[0].providerCredentials.rfc2136-tsig-secret": func(r *Run) { r.Credentials = nil },
		"runs[0].externalDnsParameters.rfc2136-tsig-secret-alg": func(r *Run) {
			r.Params["rfc2136-tsig-secret-alg"] = "md5"
		},
		"runs[0].clusters[0]": func(r *Run) { r.Clusters = []Cluster{{Cluster: "c1"}} },
		// Another run's (another project's) owner id: refused.
		"runs[0].externalDnsParameters.txt-owner-id": func(r *Run) { r.Params["txt-owner-id"] = OwnerID("a/lc/g", "dns", "ms1") },
	} {
		r := validRun()
		change(&r)
		err := c.Set(ctx, "p/lc/g", []Run{r})
		require.Equal(t, codes.InvalidArgument, errs.Code(err), field)
		require.Contains(t, err.Error(), field)
	}
	err := c.Set(ctx, "p/lc/g", []Run{validRun(), validRun()})
	require.Equal(t, codes.InvalidArgument, errs.Code(err))
	s, err := c.Status(ctx, "p/lc/g")
	require.NoError(t, err)
	require.Empty(t, s, "nothing written for refused input")
}

// TestSetReplacesTheGroupsRuns: a run no longer listed becomes releasing,
// a listed one stays (or becomes again) active, ordered by intent and id.
func TestSetReplacesTheGroupsRuns(t *testing.T) {
	c := New(storetest.Open(t), unreachable, zapNop(), time.Minute)
	ctx := context.Background()
	a, b := validRun(), validRun()
	b.Intent = "another"
	require.NoError(t, c.Set(ctx, "p/lc/g", []Run{a, b}))
	require.NoError(t, c.Set(ctx, "p/lc/g", []Run{a}))
	s, err := c.Status(ctx, "p/lc/g")
	require.NoError(t, err)
	require.Len(t, s, 2)
	require.Equal(t, []string{"another", "releasing"}, []string{s[0].GetIntent(), s[0].GetState()})
	require.Equal(t, []string{"dns", "active"}, []string{s[1].GetIntent(), s[1].GetState()})
	require.NoError(t, c.Set(ctx, "p/lc/g", []Run{a, b}))
	s, err = c.Status(ctx, "p/lc/g")
	require.NoError(t, err)
	require.Equal(t, "active", s[0].GetState())
}

// TestCredentialsStaySealed: the TSIG secret is in neither the stored
// record body nor any log line, while passes fail (cluster unreachable,
// key refused by the server) and their errors are logged.
func TestCredentialsStaySealed(t *testing.T) {
	b := bindtest.Start(t)
	st := storetest.Open(t)
	core, logs := observer.New(zap.DebugLevel)
	var lr bytes.Buffer
	logrus.SetOutput(&lr)
	prevLevel := logrus.GetLevel()
	logrus.SetLevel(logrus.DebugLevel)
	t.Cleanup(func() { logrus.SetLevel(prevLevel) })
	c := New(st, unreachable, zap.New(core), time.Minute)
	c.PassTimeout = 20 * time.Second
	allow(t, c, fmt.Sprintf("%s:%d", b.Addr, b.Port))
	ctx := context.Background()

	secret := "dGhpcyBpcyBub3QgdGhlIHNlcnZlcidzIGtleSE=" // well-formed, but not b's key
	r := validRun()
	r.Params = bindParams(b)
	r.Credentials = map[string]string{"rfc2136-tsig-secret": secret}
	noCluster := r
	noCluster.ID, noCluster.Clusters = "ms2", nil
	require.NoError(t, c.Set(ctx, "p/lc/g", []Run{r, noCluster}))
	require.NoError(t, c.SyncOnce(ctx))

	s, err := c.Status(ctx, "p/lc/g")
	require.NoError(t, err)
	require.Len(t, s, 2)
	require.Equal(t, "cluster edge/c1 could not be reached", s[0].GetLastError())
	require.NotEmpty(t, s[1].GetLastError(), "BIND refuses a wrong key")
	require.Nil(t, s[1].GetLastSync())

	cur, err := st.Database().Collection("dns_runs").Find(ctx, bson.D{})
	require.NoError(t, err)
	var raw []bson.Raw
	require.NoError(t, cur.All(ctx, &raw))
	require.Len(t, raw, 2)
	for _, doc := range raw {
		body, err := doc.LookupErr("body")
		require.NoError(t, err)
		require.NotContains(t, body.String(), secret)
		require.Contains(t, body.String(), "rfc2136-tsig-secret", "the credential's name is kept")
		require.NotContains(t, doc.String(), secret, "sealed, not in clear")
	}
	opened, err := c.runs.Secret(ctx, "p/lc/g/dns/ms1", credentialsSecret)
	require.NoError(t, err)
	require.Contains(t, string(opened), secret)

	require.NotZero(t, logs.Len(), "failed passes are logged")
	for _, e := range logs.All() {
		line := e.Message + fmt.Sprint(e.ContextMap())
		require.NotContains(t, line, secret)
	}
	require.NotContains(t, lr.String(), secret, "external-dns's own log")
}

// TestRunKeepsGoing: Run passes until its context ends, whatever the
// passes' errors.
func TestRunKeepsGoing(t *testing.T) {
	var passes atomic.Int32
	connect := func(context.Context, Cluster) (*rest.Config, error) {
		passes.Add(1)
		return nil, errors.New("down")
	}
	c := New(storetest.Open(t), connect, zapNop(), 50*time.Millisecond)
	c.MaxBackoff = 100 * time.Millisecond
	allow(t, c, "127.0.0.1:53")
	ctx, cancel := context.WithCancel(context.Background())
	r := validRun()
	require.NoError(t, c.Set(ctx, "p/lc/g", []Run{r}))
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	require.Eventually(t, func() bool {
		s, err := c.Status(ctx, "p/lc/g")
		return err == nil && len(s) == 1 && s[0].GetLastError() != "" && passes.Load() >= 3
	}, 10*time.Second, 20*time.Millisecond)
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop with its context")
	}
}

// TestReleaseNeedsTheZone: a releasing run whose zone cannot be read (here
// the server refuses its key) is kept, with the error, rather than
// forgotten with its records left behind.
func TestReleaseNeedsTheZone(t *testing.T) {
	b := bindtest.Start(t)
	c := New(storetest.Open(t), unreachable, zapNop(), time.Minute)
	noBackoff(c)
	allow(t, c, fmt.Sprintf("%s:%d", b.Addr, b.Port))
	ctx := context.Background()
	r := validRun()
	r.Params = bindParams(b)
	r.Credentials = map[string]string{"rfc2136-tsig-secret": "bm90IHRoZSBrZXk="}
	require.NoError(t, c.Set(ctx, "p/lc/g", []Run{r}))
	require.NoError(t, c.Release(ctx, "p/lc/g"))
	require.NoError(t, c.SyncOnce(ctx))
	s, err := c.Status(ctx, "p/lc/g")
	require.NoError(t, err)
	require.Len(t, s, 1, "the run is kept")
	require.Equal(t, "releasing", s[0].GetState())
	require.Contains(t, s[0].GetLastError(), "zone example.com cannot be read")

	// Fixed credentials (the group applied again, then released) let the
	// release go through; the run has no cluster, so no cluster is read.
	r.Credentials["rfc2136-tsig-secret"] = b.Secret
	r.Clusters = nil
	require.NoError(t, c.Set(ctx, "p/lc/g", []Run{r}))
	require.NoError(t, c.Release(ctx, "p/lc/g"))
	require.NoError(t, c.SyncOnce(ctx))
	s, err = c.Status(ctx, "p/lc/g")
	require.NoError(t, err)
	require.Empty(t, s, "released")
}
