package allinone_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
)

func decode(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal(b, &v), "body %s", b)
	return v
}

func TestProjectsREST(t *testing.T) {
	t.Parallel()
	s := stacktest.Start(t)
	base := s.URL + "/v2/projects"

	code, body := apitest.Call(t, s.Admin, "GET", base, "")
	require.Equal(t, 200, code)
	require.JSONEq(t, `[]`, string(body), "no projects yet")

	code, body = apitest.Call(t, s.Admin, "POST", base, `{"metadata":{"name":"p1","description":"finance","userData1":"a","userData2":"b"}}`)
	require.Equal(t, 201, code, "%s", body)
	require.JSONEq(t, `{"metadata":{"name":"p1","description":"finance","userData1":"a","userData2":"b"}}`, string(body))

	code, _ = apitest.Call(t, s.Admin, "POST", base, `{"metadata":{"name":"p0"}}`)
	require.Equal(t, 201, code)

	code, body = apitest.Call(t, s.Admin, "GET", base+"/p1", "")
	require.Equal(t, 200, code)
	require.JSONEq(t, `{"metadata":{"name":"p1","description":"finance","userData1":"a","userData2":"b"}}`, string(body))

	code, body = apitest.Call(t, s.Admin, "GET", base, "")
	require.Equal(t, 200, code)
	require.JSONEq(t, `[{"metadata":{"name":"p0","description":"","userData1":"","userData2":""}},
		{"metadata":{"name":"p1","description":"finance","userData1":"a","userData2":"b"}}]`, string(body))

	code, body = apitest.Call(t, s.Admin, "POST", base, `{"metadata":{"name":"p1"}}`)
	require.Equal(t, 409, code, "duplicate: %s", body)
	require.Equal(t, "AlreadyExists", decode(t, body).(map[string]any)["status"])

	code, body = apitest.Call(t, s.Admin, "PUT", base+"/p1", `{"metadata":{"name":"p1","description":"payroll"}}`)
	require.Equal(t, 200, code, "%s", body)
	require.JSONEq(t, `{"metadata":{"name":"p1","description":"payroll","userData1":"","userData2":""}}`, string(body))
	_, body = apitest.Call(t, s.Admin, "GET", base+"/p1", "")
	require.Contains(t, string(body), "payroll")

	code, body = apitest.Call(t, s.Admin, "PUT", base+"/p1", `{"metadata":{"name":"p2"}}`)
	require.Equal(t, 400, code)
	require.Equal(t, "metadata.name", decode(t, body).(map[string]any)["field"])

	code, _ = apitest.Call(t, s.Admin, "PUT", base+"/nope", `{"metadata":{"name":"nope"}}`)
	require.Equal(t, 404, code)

	code, body = apitest.Call(t, s.Admin, "DELETE", base+"/p1", "")
	require.Equal(t, 204, code)
	require.Empty(t, body)
	code, body = apitest.Call(t, s.Admin, "GET", base+"/p1", "")
	require.Equal(t, 404, code)
	require.JSONEq(t, `{"code":404,"status":"NotFound","message":"project \"p1\" not found"}`, string(body))
	code, _ = apitest.Call(t, s.Admin, "DELETE", base+"/p1", "")
	require.Equal(t, 404, code)

	code, _ = apitest.Call(t, s.Admin, "PATCH", base+"/p0", `{}`)
	require.Equal(t, 405, code)
	code, _ = apitest.Call(t, s.Admin, "GET", s.URL+"/v2/nothing-here", "")
	require.Equal(t, 404, code)
}

func TestProjectsBadInput(t *testing.T) {
	t.Parallel()
	s := stacktest.Start(t)
	base := s.URL + "/v2/projects"
	require.Equal(t, 201, first(apitest.Call(t, s.Admin, "POST", base, `{"metadata":{"name":"keep"}}`)))

	long := strings.Repeat("a", 64)
	cases := []struct {
		name, method, path, body, field string
	}{
		{"malformed JSON", "POST", "", `{"metadata":`, "body"},
		{"not an object", "POST", "", `[1,2]`, "body"},
		{"empty body", "POST", "", ``, "metadata"},
		{"empty object", "POST", "", `{}`, "metadata"},
		{"unknown top-level field", "POST", "", `{"metadata":{"name":"a"},"spec":{}}`, "spec"},
		{"unknown metadata field", "POST", "", `{"metadata":{"name":"a","owner":"x"}}`, "owner"},
		{"name of wrong type", "POST", "", `{"metadata":{"name":5}}`, "name"},
		{"metadata of wrong type", "POST", "", `{"metadata":"p"}`, "body"},
		{"empty name", "POST", "", `{"metadata":{"name":""}}`, "metadata.name"},
		{"over-long name", "POST", "", `{"metadata":{"name":"` + long + `"}}`, "metadata.name"},
		{"upper case name", "POST", "", `{"metadata":{"name":"Finance"}}`, "metadata.name"},
		{"underscore in name", "POST", "", `{"metadata":{"name":"a_b"}}`, "metadata.name"},
		{"name ends with dash", "POST", "", `{"metadata":{"name":"a-"}}`, "metadata.name"},
		{"dotted name", "POST", "", `{"metadata":{"name":"a.b"}}`, "metadata.name"},
		{"over-long description", "POST", "", `{"metadata":{"name":"a","description":"` + strings.Repeat("d", 1025) + `"}}`, "metadata.description"},
		{"bad path name on GET", "GET", "/Bad_Name", ``, "project"},
		{"over-long path name", "GET", "/" + long, ``, "project"},
		{"bad path name on PUT", "PUT", "/Bad", `{"metadata":{"name":"Bad"}}`, "project"},
		{"PUT without metadata", "PUT", "/keep", `{}`, "metadata"},
		{"PUT unknown field", "PUT", "/keep", `{"metadata":{"name":"keep"},"x":1}`, "x"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, body := apitest.Call(t, s.Admin, c.method, base+c.path, c.body)
			require.Equal(t, 400, code, "%s", body)
			e := decode(t, body).(map[string]any)
			require.Equal(t, c.field, e["field"], "%s", body)
			require.Equal(t, "InvalidArgument", e["status"])
			require.NotEmpty(t, e["message"])
		})
	}
	code, body := apitest.Call(t, s.Admin, "GET", base, "")
	require.Equal(t, 200, code)
	require.JSONEq(t, `[{"metadata":{"name":"keep","description":"","userData1":"","userData2":""}}]`, string(body), "nothing else was stored")
}

func first(code int, _ []byte) int { return code }

// TestProjectsConcurrentCreate: of 20 simultaneous creates of one name,
// exactly one wins.
func TestProjectsConcurrentCreate(t *testing.T) {
	t.Parallel()
	s := stacktest.Start(t)
	const n = 20
	codes := make(chan int, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := s.Admin.Post(s.URL+"/v2/projects", "application/json", bytes.NewBufferString(`{"metadata":{"name":"race"}}`))
			if err != nil {
				t.Error(err)
				return
			}
			_ = resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	wg.Wait()
	close(codes)
	count := map[int]int{}
	for c := range codes {
		count[c]++
	}
	require.Equal(t, map[int]int{201: 1, 409: n - 1}, count)
}

// TestProjectsConcurrentUpdate: simultaneous PUTs either land or get 409;
// none is silently lost, and the stored description is a winner's.
func TestProjectsConcurrentUpdate(t *testing.T) {
	t.Parallel()
	s := stacktest.Start(t)
	require.Equal(t, 201, first(apitest.Call(t, s.Admin, "POST", s.URL+"/v2/projects", `{"metadata":{"name":"p"}}`)))
	const n = 12
	type result struct {
		code int
		desc string
	}
	results := make(chan result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			desc := "writer-" + string(rune('a'+i))
			code, _ := apitest.Call(t, s.Admin, "PUT", s.URL+"/v2/projects/p", `{"metadata":{"name":"p","description":"`+desc+`"}}`)
			results <- result{code, desc}
		}()
	}
	wg.Wait()
	close(results)
	var winners []string
	for r := range results {
		require.Contains(t, []int{200, 409}, r.code)
		if r.code == 200 {
			winners = append(winners, r.desc)
		}
	}
	require.NotEmpty(t, winners)
	_, body := apitest.Call(t, s.Admin, "GET", s.URL+"/v2/projects/p", "")
	stored := decode(t, body).(map[string]any)["metadata"].(map[string]any)["description"]
	require.Contains(t, winners, stored, "the stored value is one that was acknowledged")
	if len(winners) > 1 {
		t.Logf("%d PUTs landed one after another; the rest got 409", len(winners))
	}
}

// TestStoreOutage: with the store down, REST answers 503; when it is back
// the same running program serves again without a restart.
func TestStoreOutage(t *testing.T) {
	t.Parallel()
	s := stacktest.Start(t)
	emb := s.Env.Store.Embedded()
	if emb == nil {
		t.Skip("outage is injected into the embedded store only")
	}
	require.Equal(t, 201, first(apitest.Call(t, s.Admin, "POST", s.URL+"/v2/projects", `{"metadata":{"name":"p"}}`)))
	emb.StopBackend()
	code, body := apitest.Call(t, s.Admin, "GET", s.URL+"/v2/projects/p", "")
	require.Equal(t, 503, code, "%s", body)
	require.Equal(t, "Unavailable", decode(t, body).(map[string]any)["status"])
	code, _ = apitest.Call(t, s.Admin, "POST", s.URL+"/v2/projects", `{"metadata":{"name":"q"}}`)
	require.Equal(t, 503, code)

	require.NoError(t, emb.StartBackend())
	require.Eventually(t, func() bool {
		code, _ := apitest.Call(t, s.Admin, "GET", s.URL+"/v2/projects/p", "")
		return code == 200
	}, 30*time.Second, 200*time.Millisecond)
	require.Equal(t, 404, first(apitest.Call(t, s.Admin, "GET", s.URL+"/v2/projects/q", "")), "the create during the outage left nothing")
}
