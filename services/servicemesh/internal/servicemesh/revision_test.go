package servicemesh_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	servicemeshv1 "github.com/dcm-project/dcm/gen/dcm/servicemesh/v1"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/services/servicemesh/internal/render"
)

// TestRevisionPerInstallation: two projects' logical clouds of the same
// name get two revisions (issue 29: the injector of one selected the
// other's namespaces by a shared revision); a logical cloud keeps its
// revision from one render to the next; a mesh recorded before revisions
// were derived keeps the one it has.
func TestRevisionPerInstallation(t *testing.T) {
	t.Parallel()
	c := serve(t, newFakeCadist(t))
	ctx := context.Background()
	one, err := c.in.RenderControlPlanes(ctx, meshRequest("lc1"))
	require.NoError(t, err)
	req := meshRequest("lc1")
	req.Project = "p2"
	req.IstioNamespace = "p2-mesh"
	two, err := c.in.RenderControlPlanes(ctx, req)
	require.NoError(t, err)
	require.NotEqual(t, one.GetRevision(), two.GetRevision())
	require.Equal(t, render.Revision("p2", "lc1"), two.GetRevision())
	for _, cm := range two.GetClusters() {
		for _, m := range cm.GetManifests() {
			require.NotContains(t, m.GetJson(), `"istio.io/rev":"`+one.GetRevision()+`"`, "no object of p2 carries p1's revision")
			require.NotContains(t, m.GetJson(), `"values":["`+one.GetRevision()+`"]`)
		}
	}
	again, err := c.in.RenderControlPlanes(ctx, meshRequest("lc1"))
	require.NoError(t, err)
	require.Equal(t, one.GetRevision(), again.GetRevision(), "stable")

	// A document written before: revision = the logical cloud's name.
	docs := store.NewRecords(c.st, "service_meshes", "service mesh", func() *servicemeshv1.ServiceMesh { return &servicemeshv1.ServiceMesh{} })
	_, err = docs.Modify(ctx, store.Key("p1", "lc1"), func(m *servicemeshv1.ServiceMesh) error {
		m.Revision = "lc1"
		return nil
	})
	require.NoError(t, err)
	legacy, err := c.in.RenderControlPlanes(ctx, meshRequest("lc1"))
	require.NoError(t, err)
	require.Equal(t, "lc1", legacy.GetRevision(), "an existing mesh keeps its revision")

	// Released (mesh turned off): the next mesh gets the derived one.
	_, err = c.in.ReleaseControlPlanes(ctx, &servicemeshv1.ReleaseControlPlanesRequest{Project: "p1", LogicalCloud: "lc1"})
	require.NoError(t, err)
	fresh, err := c.in.RenderControlPlanes(ctx, meshRequest("lc1"))
	require.NoError(t, err)
	require.Equal(t, render.Revision("p1", "lc1"), fresh.GetRevision())
}

func TestRevisionNames(t *testing.T) {
	t.Parallel()
	long := "a123456789012345678901234567890123456789012345678901234567890-z"
	for _, lc := range []string{"lc1", long, "x", "a-------------------------------------------------------------b"} {
		r := render.Revision("p", lc)
		require.LessOrEqual(t, len(r), render.MaxRevision, lc)
		require.Regexp(t, `^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`, r, lc)
		require.Equal(t, r, render.Revision("p", lc))
		require.NotEqual(t, r, render.Revision("q", lc))
	}
	require.Equal(t, render.Revision("p", long), render.Revision("p", long))
	require.NotEqual(t, render.Revision("p", long), render.Revision("p", long[:62]+"y"), "cut names still differ by their hash")
}
