package allinone_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/pki"
	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
)

// TestLogicalCloudNamesOnlyItsProjectsRoot: a project admin of p1 may not
// name p2's root in spec.ca-root (403 naming the field, at create and at
// update, no logical cloud left), nor a root that does not exist (400);
// p1's own root and a root an admin marked shared are accepted. A reader
// of p1 does not see p2's root.
func TestLogicalCloudNamesOnlyItsProjectsRoot(t *testing.T) {
	t.Parallel()
	s := stacktest.Start(t)
	admin := apitest.NewREST(t, s)
	for _, p := range []string{"p1", "p2"} {
		admin.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"`+p+`"}}`)
		admin.Want(201, "POST", "/v2/cadist/roots", `{"metadata":{"name":"root-`+p+`"},"projects":["`+p+`"]}`)
	}
	admin.Want(201, "POST", "/v2/cadist/roots", `{"metadata":{"name":"common"},"shared":true}`)
	cert := s.Issue(t, pki.Identity{Subject: "pa-p1", Role: pki.RoleProjectAdmin, Project: "p1"}, time.Now().Add(time.Hour))
	pa := &apitest.REST{T: t, C: s.Client(&cert), Base: s.URL}
	// The shared mark is an admin's: a project admin creates no root.
	pa.Want(403, "POST", "/v2/cadist/roots", `{"metadata":{"name":"mine"},"shared":true}`)
	admin.Want(404, "GET", "/v2/cadist/roots/mine", "")
	lcs := "/v2/projects/p1/logical-clouds"
	mesh := func(name, root string) string {
		return `{"metadata":{"name":"` + name + `"},"spec":{"service-mesh":{"enabled":true},"ca-root":"` + root + `"}}`
	}

	body := pa.Want(403, "POST", lcs, mesh("lc-a", "root-p2"))
	require.Contains(t, body, `"field":"spec.ca-root"`)
	require.Contains(t, body, `root \"root-p2\" is neither shared nor one of project \"p1\"'s roots`)
	pa.Want(404, "GET", lcs+"/lc-a", "")
	require.Contains(t, pa.Want(400, "POST", lcs, mesh("lc-a", "no-such-root")), `"field":"spec.ca-root"`)
	pa.Want(404, "GET", lcs+"/lc-a", "")

	require.Equal(t, true, decodeMap(t, admin.Want(200, "GET", "/v2/cadist/roots/common", ""))["shared"])
	pa.Want(201, "POST", lcs, mesh("lc-own", "root-p1"))
	pa.Want(201, "POST", lcs, mesh("lc-shared", "common"))
	// Changing it later to p2's root: refused the same way, nothing changes.
	lc := decodeMap(t, pa.Want(200, "GET", lcs+"/lc-own", ""))
	spec := lc["spec"].(map[string]any)
	require.Equal(t, "root-p1", spec["ca-root"])
	require.Contains(t, pa.Want(403, "PUT", lcs+"/lc-own", `{"metadata":{"name":"lc-own"},"spec":{"ca-root":"root-p2"}}`), `"field":"spec.ca-root"`)
	require.Equal(t, "root-p1", decodeMap(t, pa.Want(200, "GET", lcs+"/lc-own", ""))["spec"].(map[string]any)["ca-root"])
	pa.Want(200, "PUT", lcs+"/lc-own", `{"metadata":{"name":"lc-own"},"spec":{"ca-root":"common"}}`)

	// What a reader (and the project admin) of p1 sees of the roots.
	rc := s.Issue(t, pki.Identity{Subject: "r-p1", Role: pki.RoleReader, Project: "p1"}, time.Now().Add(time.Hour))
	reader := &apitest.REST{T: t, C: s.Client(&rc), Base: s.URL}
	for _, c := range []*apitest.REST{reader, pa} {
		list := c.Want(200, "GET", "/v2/cadist/roots", "")
		require.Contains(t, list, `"root-p1"`)
		require.Contains(t, list, `"common"`)
		require.NotContains(t, list, `"root-p2"`)
		c.Want(404, "GET", "/v2/cadist/roots/root-p2", "")
		c.Want(404, "GET", "/v2/cadist/roots/root-p2/certificate", "")
		c.Want(200, "GET", "/v2/cadist/roots/root-p1", "")
	}
	require.Contains(t, admin.Want(200, "GET", "/v2/cadist/roots", ""), `"root-p2"`)
}
