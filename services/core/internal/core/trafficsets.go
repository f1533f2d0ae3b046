package core

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	trafficv1 "github.com/dcm-project/dcm/gen/dcm/traffic/v1"
)

// A traffic intent names clusters in its clusters lists (the target's,
// each client service's: TrafficCluster). The traffic service stores
// intents without asking core, so core checks them against the project's
// cluster sets when it applies or updates the group (checkIntentClusters),
// before anything is rendered or rolled out: 403 naming the intent, the
// field, the cluster and the rule.

// intentCluster is one cluster an intent names, with where.
type intentCluster struct {
	field, key string
}

// checkIntentClusters refuses (403) group g if one of its intents names a
// cluster that the project's cluster sets do not admit.
func checkIntentClusters(ctx context.Context, traffic trafficv1.TrafficServiceClient, sets *ClusterSets, g groupRef) error {
	named, err := groupClusters(ctx, traffic, g)
	if err != nil || len(named) == 0 {
		return err
	}
	gt, err := sets.gate(ctx, g.project)
	if err != nil {
		return err
	}
	for _, n := range named {
		out, err := gt.refused(ctx, []string{n.key})
		if err != nil {
			return err
		}
		if len(out) > 0 {
			return gt.refuse(n.field, out)
		}
	}
	return nil
}

// groupClusters reads every intent of group g that can name clusters
// (inter-cluster, intra-cluster, external outbound and inbound; DNS
// provider intents name none) and the clusters each names.
func groupClusters(ctx context.Context, traffic trafficv1.TrafficServiceClient, g groupRef) ([]intentCluster, error) {
	// One page of each kind: its intents and the next page's token.
	type page func(tok string) ([]proto.Message, string, error)
	kinds := []struct {
		name string
		list page
	}{
		{"interclusterservice", func(tok string) ([]proto.Message, string, error) {
			r, err := traffic.ListInterclusterIntents(ctx, &trafficv1.ListInterclusterIntentsRequest{
				Project: g.project, CompositeApp: g.rb, Version: g.version, Group: g.group, PageToken: tok})
			return asMessages(r.GetInterclusterIntents()), r.GetNextPageToken(), err
		}},
		{"intraclusterservice", func(tok string) ([]proto.Message, string, error) {
			r, err := traffic.ListIntraclusterIntents(ctx, &trafficv1.ListIntraclusterIntentsRequest{
				Project: g.project, CompositeApp: g.rb, Version: g.version, Group: g.group, PageToken: tok})
			return asMessages(r.GetIntraclusterIntents()), r.GetNextPageToken(), err
		}},
		{"externaloutboundaccess", func(tok string) ([]proto.Message, string, error) {
			r, err := traffic.ListExternalOutboundIntents(ctx, &trafficv1.ListExternalOutboundIntentsRequest{
				Project: g.project, CompositeApp: g.rb, Version: g.version, Group: g.group, PageToken: tok})
			return asMessages(r.GetExternalOutboundIntents()), r.GetNextPageToken(), err
		}},
		{"externalinboundaccess", func(tok string) ([]proto.Message, string, error) {
			r, err := traffic.ListExternalInboundIntents(ctx, &trafficv1.ListExternalInboundIntentsRequest{
				Project: g.project, CompositeApp: g.rb, Version: g.version, Group: g.group, PageToken: tok})
			return asMessages(r.GetExternalInboundIntents()), r.GetNextPageToken(), err
		}},
	}
	var out []intentCluster
	for _, k := range kinds {
		for tok := ""; ; {
			intents, next, err := k.list(tok)
			if err != nil {
				return nil, err
			}
			for _, in := range intents {
				m := in.ProtoReflect()
				name := m.Get(m.Descriptor().Fields().ByName("name")).String()
				walkClusters(m, k.name+"/"+name+": ", &out)
			}
			if tok = next; tok == "" {
				break
			}
		}
	}
	return out, nil
}

// asMessages lists ms as proto messages.
func asMessages[M proto.Message](ms []M) []proto.Message {
	out := make([]proto.Message, 0, len(ms))
	for _, m := range ms {
		out = append(out, m)
	}
	return out
}

// trafficClusterName is the message a cluster is named by in an intent.
var trafficClusterName = (&trafficv1.TrafficCluster{}).ProtoReflect().Descriptor().FullName()

// walkClusters appends every TrafficCluster under m to out, with its
// field path in JSON names after prefix.
func walkClusters(m protoreflect.Message, prefix string, out *[]intentCluster) {
	if m.Descriptor().FullName() == trafficClusterName {
		tc, _ := m.Interface().(*trafficv1.TrafficCluster)
		*out = append(*out, intentCluster{field: prefix, key: clusterKey(tc.GetClusterProvider(), tc.GetClusterName())})
		return
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Message() == nil || fd.IsMap() {
			return true
		}
		path := prefix + fd.JSONName()
		if prefix != "" && prefix[len(prefix)-1] != ' ' {
			path = prefix + "." + fd.JSONName()
		}
		if fd.IsList() {
			for i := range v.List().Len() {
				walkClusters(v.List().Get(i).Message(), fmt.Sprintf("%s[%d]", path, i), out)
			}
			return true
		}
		walkClusters(v.Message(), path, out)
		return true
	})
}
