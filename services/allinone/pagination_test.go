package allinone_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
)

// page GETs one page of a list and returns its status, body and
// Next-Page-Token header.
func page(t *testing.T, c *http.Client, u string) (int, []byte, string) {
	t.Helper()
	resp, err := c.Get(u)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b, resp.Header.Get("Next-Page-Token")
}

func names(t *testing.T, body []byte) []string {
	t.Helper()
	var items []struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	require.NoError(t, json.Unmarshal(body, &items), "%s", body)
	out := make([]string, 0, len(items))
	for _, it := range items {
		out = append(out, it.Metadata.Name)
	}
	return out
}

// TestPaginationREST pages through 250 projects over REST: pages of
// page-size, the next one asked for by page-token, the last without a
// Next-Page-Token; no page-size is the default (100), one over the
// maximum is clamped; a negative or malformed page-size and a bad or
// foreign page-token are 400 naming the parameter. A wrapped list
// answers next-page-token in its body too.
func TestPaginationREST(t *testing.T) {
	t.Parallel()
	s := stacktest.Start(t)
	base := s.URL + "/v2/projects"
	var wg sync.WaitGroup
	errc := make(chan error, 250)
	for w := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < 250; i += 5 {
				req, err := http.NewRequest("POST", base, strings.NewReader(fmt.Sprintf(`{"metadata":{"name":"p-%03d"}}`, i)))
				if err != nil {
					errc <- err
					return
				}
				req.Header.Set("Content-Type", "application/json")
				resp, err := s.Admin.Do(req)
				if err != nil {
					errc <- err
					return
				}
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					errc <- fmt.Errorf("create p-%03d: %d", i, resp.StatusCode)
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		require.NoError(t, err)
	}

	var all []string
	next := ""
	for pages := 1; ; pages++ {
		u := base + "?page-size=100"
		if next != "" {
			u += "&page-token=" + url.QueryEscape(next)
		}
		code, body, tok := page(t, s.Admin, u)
		require.Equal(t, 200, code, "%s", body)
		got := names(t, body)
		all = append(all, got...)
		if tok == "" {
			require.Equal(t, 3, pages)
			require.Len(t, got, 50)
			break
		}
		require.Len(t, got, 100)
		next = tok
	}
	require.Len(t, all, 250)
	for i, n := range all {
		require.Equal(t, fmt.Sprintf("p-%03d", i), n, "ordered by name, none skipped or repeated")
	}

	code, body, tok := page(t, s.Admin, base)
	require.Equal(t, 200, code)
	require.Len(t, names(t, body), 100, "no page-size: the default")
	require.NotEmpty(t, tok)
	code, body, _ = page(t, s.Admin, base+"?page-size=0")
	require.Equal(t, 200, code)
	require.Len(t, names(t, body), 100, "page-size 0: the default")
	code, body, tok = page(t, s.Admin, base+"?page-size=5000")
	require.Equal(t, 200, code, "%s", body)
	require.Len(t, names(t, body), 250, "over the maximum (1000): clamped, not refused")
	require.Empty(t, tok)

	r := apitest.NewREST(t, s)
	r.Want(201, "POST", "/v2/projects/p-000/logical-clouds", `{"metadata":{"name":"lc-1"}}`)
	_, _, projectsTok := page(t, s.Admin, base+"?page-size=1")
	for _, c := range []struct{ query, field string }{
		{"page-size=-1", "page-size"},
		{"page-size=abc", "page-size"},
		{"page-size=1&page-size=2", "page-size"},
		{"page-token=garbage!", "page-token"},
		{"page-token=AQ", "page-token"},
		{"page-token=" + url.QueryEscape(projectsTok), "page-token"}, // the projects list's, on another list
	} {
		u := base + "/p-000/logical-clouds?" + c.query
		code, body, _ := page(t, s.Admin, u)
		require.Equal(t, 400, code, "%s: %s", c.query, body)
		var e map[string]any
		require.NoError(t, json.Unmarshal(body, &e))
		require.Equal(t, c.field, e["field"], "%s: %s", c.query, body)
	}

	// Bare arrays carry the token in the header only; wrapped lists in
	// the body as well.
	lc := "/v2/projects/p-000/logical-clouds/lc-1"
	for i := range 5 {
		r.Want(201, "POST", lc+"/kv-pairs", fmt.Sprintf(`{"metadata":{"name":"kv-%d"},"spec":{"kv":[{"a":"b"}]}}`, i))
	}
	code, body, tok = page(t, s.Admin, s.URL+lc+"/kv-pairs?page-size=2")
	require.Equal(t, 200, code, "%s", body)
	require.Equal(t, []string{"kv-0", "kv-1"}, names(t, body))
	require.NotEmpty(t, tok)
	code, body, _ = page(t, s.Admin, s.URL+lc+"/kv-pairs?page-size=10&page-token="+url.QueryEscape(tok))
	require.Equal(t, 200, code, "%s", body)
	require.Equal(t, []string{"kv-2", "kv-3", "kv-4"}, names(t, body))
	code, body, _ = page(t, s.Admin, s.URL+lc+"/cluster-references?page-size=10&page-token="+url.QueryEscape(tok))
	require.Equal(t, 400, code, "a kv-pairs token on the references of the same logical cloud: %s", body)
	code, body, _ = page(t, s.Admin, s.URL+lc+"/cluster-references")
	require.Equal(t, 200, code, "%s", body)
	require.JSONEq(t, `{"cluster-references":[],"next-page-token":""}`, string(body))
}
