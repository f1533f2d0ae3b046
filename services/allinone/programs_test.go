package allinone_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/platform/kubetest"
	"github.com/dcm-project/dcm/platform/pki"
	"github.com/dcm-project/dcm/services/cadist"
	"github.com/dcm-project/dcm/services/core"
	"github.com/dcm-project/dcm/services/namespace"
	"github.com/dcm-project/dcm/services/quota"
	"github.com/dcm-project/dcm/services/rsync"
	"github.com/dcm-project/dcm/services/servicemesh"
	"github.com/dcm-project/dcm/services/traffic"
	"github.com/dcm-project/dcm/services/user"
)

// serviceProgram is one of the suite's service programs.
type serviceProgram struct {
	name  string
	build app.Build
}

// servicePrograms are the suite's service programs (the gateway aside), in
// the order the tests start them: rsync first, as it runs the embedded
// store the others share when they share one.
var servicePrograms = []serviceProgram{
	{rsync.Name, rsync.Build}, {core.Name, core.Build}, {namespace.Name, namespace.Build}, {user.Name, user.Build},
	{quota.Name, quota.Build}, {servicemesh.Name, servicemesh.Build}, {cadist.Name, cadist.Build}, {traffic.Name, traffic.Build},
}

// loopbackAddrs reserves n free loopback addresses for each program named
// in counts (each service program once when counts is nil).
func loopbackAddrs(t *testing.T, counts map[string]int) map[string][]string {
	t.Helper()
	if counts == nil {
		counts = map[string]int{}
		for _, p := range servicePrograms {
			counts[p.name] = 1
		}
	}
	addrs := map[string][]string{}
	for name, n := range counts {
		for range n {
			addr, err := kubetest.FreeAddr()
			require.NoError(t, err)
			addrs[name] = append(addrs[name], addr)
		}
	}
	return addrs
}

// peerFlags are the flags naming every service's addresses (a list where
// a service has replicas), as each program is told them; core's is the
// gateway's alone (gatewayFlags): no other program takes -core-addr.
func peerFlags(addrs map[string][]string) []string {
	var out []string
	for _, p := range servicePrograms {
		if p.name != core.Name {
			out = append(out, "-"+p.name+"-addr", strings.Join(addrs[p.name], ","))
		}
	}
	return out
}

// gatewayFlags are peerFlags with core's addresses: the gateway's.
func gatewayFlags(addrs map[string][]string) []string {
	return append(peerFlags(addrs), "-core-addr", strings.Join(addrs[core.Name], ","))
}

// programSet starts programs in the test's process, each with its own
// context, logging into one buffer shown when the test fails; they stop in
// reverse order when the test ends.
type programSet struct {
	t    *testing.T
	logs *syncBuffer
	all  []func()
	// stopErrorsExpected: a program may stop with an error (its peers
	// were killed under it); a stop error is not the test's failure.
	stopErrorsExpected bool
}

func newProgramSet(t *testing.T) *programSet {
	ps := &programSet{t: t, logs: &syncBuffer{}}
	t.Cleanup(func() {
		for _, stop := range slices.Backward(ps.all) {
			stop()
		}
		if t.Failed() {
			t.Logf("the programs' logs:\n%s", ps.logs.String())
		}
	})
	return ps
}

// start starts program name with args (after the tests' common ones: no
// HTTP listener unless args give one, warnings and errors logged) and
// returns it with its stop, which may be called before the test ends.
func (ps *programSet) start(name string, build app.Build, needStore bool, args ...string) (*app.Program, func()) {
	t := ps.t
	t.Helper()
	args = slices.Concat([]string{"-log-level", "warn", "-http-addr", ""}, args)
	ctx, cancel := context.WithCancel(context.Background())
	p, err := app.Start(ctx, name, args, needStore, build, app.LogTo(ps.logs))
	if err != nil {
		cancel()
		t.Fatalf("start %s: %v", name, err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := p.Wait(); err != nil && !ps.stopErrorsExpected {
				t.Errorf("%s stopped with %v", name, err)
			}
		})
	}
	ps.all = append(ps.all, stop)
	return p, stop
}

// add has stop run with the programs' stops, in reverse order of starting
// (a program of the test's started another way).
func (ps *programSet) add(stop func()) { ps.all = append(ps.all, stop) }

// adminClient is an HTTPS client with the admin certificate of the local
// PKI in dir, trusting roots.
func adminClient(t *testing.T, dir string, roots *x509.CertPool) *http.Client {
	t.Helper()
	admin, err := tls.LoadX509KeyPair(filepath.Join(dir, pki.AdminCertFile), filepath.Join(dir, pki.AdminKeyFile))
	require.NoError(t, err)
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		MinVersion: tls.VersionTLS12, RootCAs: roots, Certificates: []tls.Certificate{admin}}}}
}
