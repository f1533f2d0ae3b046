package allinone_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/pki"
	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
)

// TestMeshLimitPerProject (issue 29, medium): a project-admin cannot
// create mesh-enabled logical clouds without bound. With
// DCM_MAX_MESHES_PER_PROJECT=2 the third mesh of a project is refused with
// 409 MESH_LIMIT naming spec.service-mesh, by every way a mesh is turned
// on (create, update, seed 002's control-plane body for a new or an
// existing logical cloud), and nothing of the refused request stays;
// another project has places of its own, and deleting a mesh frees one.
func TestMeshLimitPerProject(t *testing.T) {
	t.Parallel()
	s := stacktest.StartWith(t, stacktest.Options{Args: []string{"-max-meshes-per-project", "2"}})
	admin := apitest.NewREST(t, s)
	paOf := func(project string) *apitest.REST {
		admin.Want(201, "POST", "/v2/projects", fmt.Sprintf(`{"metadata":{"name":%q}}`, project))
		cert := s.Issue(t, pki.Identity{Subject: "pa-" + project, Role: pki.RoleProjectAdmin, Project: project}, time.Now().Add(time.Hour))
		return &apitest.REST{T: t, C: s.Client(&cert), Base: s.URL}
	}
	r := paOf("ml1")
	const lcs = "/v2/projects/ml1/logical-clouds"
	mesh := func(name string) string {
		return fmt.Sprintf(`{"metadata":{"name":%q},"spec":{"namespace":"%s-ns","service-mesh":{"enabled":true}}}`, name, name)
	}
	refused := func(body string) {
		t.Helper()
		got := decodeMap(t, body)
		require.Equal(t, "MESH_LIMIT", got["reason"], body)
		require.Contains(t, got["message"], "spec.service-mesh")
		require.Contains(t, got["message"], "maximum of 2")
		require.Contains(t, body, `"field":"spec.service-mesh"`)
		t.Logf("refused: %s", strings.TrimSpace(body))
	}
	r.Want(201, "POST", lcs, mesh("m1"))
	r.Want(201, "POST", lcs, mesh("m2"))
	// Create: the third is refused and not stored.
	refused(r.Want(409, "POST", lcs, mesh("m3")))
	r.Want(404, "GET", lcs+"/m3", "")
	// A logical cloud without the mesh is fine; turning it on is not.
	r.Want(201, "POST", lcs, `{"metadata":{"name":"plain"},"spec":{"namespace":"plain-ns"}}`)
	refused(r.Want(409, "PUT", lcs+"/plain", `{"metadata":{"name":"plain"},"spec":{"service-mesh":{"enabled":true}}}`))
	require.NotContains(t, r.Want(200, "GET", lcs+"/plain", ""), `"enabled":true`)
	// An update of a logical cloud that has the mesh already is fine.
	r.Want(200, "PUT", lcs+"/m1", `{"metadata":{"name":"m1"},"spec":{"service-mesh":{"enabled":true}}}`)
	// Seed 002's control-plane body: a new logical cloud, an existing one.
	refused(r.Want(409, "POST", lcs+"/control-plane", `{"name":"m4","namespace":"m4-istio-system"}`))
	r.Want(404, "GET", lcs+"/m4", "")
	refused(r.Want(409, "POST", lcs+"/control-plane", `{"name":"plain","namespace":"plain-istio-system"}`))
	require.NotContains(t, r.Want(200, "GET", lcs+"/plain", ""), `"enabled":true`)

	// Per project: another project has its own places.
	other := paOf("ml2")
	other.Want(201, "POST", "/v2/projects/ml2/logical-clouds", mesh("m1"))

	// Deleting a mesh logical cloud frees its place.
	r.Want(204, "DELETE", lcs+"/m2", "")
	r.Want(200, "PUT", lcs+"/plain", `{"metadata":{"name":"plain"},"spec":{"service-mesh":{"enabled":true}}}`)
	refused(r.Want(409, "POST", lcs, mesh("m5")))
}
