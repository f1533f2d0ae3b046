package allinone_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
)

// TestTrafficGroupsPurgedWithTheirLogicalCloud: deleting a logical cloud
// removes its traffic intent groups and their intents from the traffic
// service (core's cascade, as for the namespace, user and quota
// services): a logical cloud made again with the same name starts with
// none, and the store holds none of the old ones. Another logical cloud's
// group stays.
func TestTrafficGroupsPurgedWithTheirLogicalCloud(t *testing.T) {
	t.Parallel()
	s := stacktest.Start(t)
	r := apitest.NewREST(t, s)
	r.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"a"}}`)
	for _, lc := range []string{"lc-a", "lc-keep"} {
		r.Want(201, "POST", "/v2/projects/a/logical-clouds", `{"metadata":{"name":"`+lc+`"}}`)
	}
	const app = "/v2/projects/a/rb/app/v1"
	r.Want(201, "POST", app+"/traffic-intent-groups", `{"name":"g1","logical-cloud":"lc-a"}`)
	r.Want(201, "POST", app+"/traffic-intent-groups/g1/intraclusterservice", seedIntracluster)
	r.Want(201, "POST", "/v2/projects/a/rb/other/v2/traffic-intent-groups", `{"name":"g2","logical-cloud":"lc-a"}`)
	r.Want(201, "POST", app+"/traffic-intent-groups", `{"name":"kept","logical-cloud":"lc-keep"}`)

	r.Want(204, "DELETE", "/v2/projects/a/logical-clouds/lc-a", "")
	r.Want(201, "POST", "/v2/projects/a/logical-clouds", `{"metadata":{"name":"lc-a"}}`)

	r.Want(404, "GET", app+"/traffic-intent-groups/g1", "")
	r.Want(404, "GET", "/v2/projects/a/rb/other/v2/traffic-intent-groups/g2", "")
	r.Want(200, "GET", app+"/traffic-intent-groups/kept", "")
	groups, ok := decode(t, []byte(r.Want(200, "GET", app+"/traffic-intent-groups", ""))).([]any)
	require.True(t, ok)
	require.Len(t, groups, 1, "only the other logical cloud's group is left")

	db := s.Env.Store.Database()
	count := func(coll string, filter bson.D) int64 {
		t.Helper()
		n, err := db.Collection(coll).CountDocuments(context.Background(), filter)
		require.NoError(t, err)
		return n
	}
	require.Zero(t, count("traffic_intent_groups", bson.D{{Key: "body.logical_cloud", Value: "lc-a"}}), "the store holds none of the old groups")
	require.EqualValues(t, 1, count("traffic_intent_groups", bson.D{}))
	require.Zero(t, count("traffic_intracluster_intents", bson.D{}), "nor their intents")

	// The name is free again under the new logical cloud.
	r.Want(201, "POST", app+"/traffic-intent-groups", `{"name":"g1","logical-cloud":"lc-a"}`)
}
