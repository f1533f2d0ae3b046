package core

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/errs"
)

// TestPlanReadsTheSeedsUserTypes: a user's type is read in any case, as
// the seeds spell it (seed 000's "Token", "certificate"), and stored
// lower-case, in both bodies; the seeds' UNPW and APIKey are refused
// naming the field and why.
func TestPlanReadsTheSeedsUserTypes(t *testing.T) {
	t.Parallel()
	nested := func(typ string) *corev1.CreateLogicalCloudRequest {
		return &corev1.CreateLogicalCloudRequest{Project: "p1", Metadata: &typesv1.Metadata{Name: "lc-1"},
			Spec: &corev1.LogicalCloudSpec{User: &corev1.LogicalCloudUser{UserName: "user-1", Type: typ}}}
	}
	flat := func(typ string) *corev1.CreateLogicalCloudRequest {
		user, err := structpb.NewValue([]any{map[string]any{"name": "user-1", "type": typ}})
		require.NoError(t, err)
		return &corev1.CreateLogicalCloudRequest{Project: "p1", Name: "lc-1", User: user}
	}
	for typ, want := range map[string]string{
		"": "certificate", "certificate": "certificate", "Certificate": "certificate", "CERTIFICATE": "certificate",
		"token": "token", "Token": "token", "TOKEN": "token", " Token ": "token",
	} {
		p, err := planCreate(nested(typ), grants{})
		require.NoError(t, err, "%q", typ)
		require.Equal(t, want, p.lc.GetSpec().GetUser().GetType(), "%q", typ)
		require.Equal(t, want, p.users[0].GetType(), "%q", typ)
		p, err = planCreate(flat(typ), grants{})
		require.NoError(t, err, "%q (flat)", typ)
		require.Equal(t, want, p.users[0].GetType(), "%q (flat)", typ)
	}
	for typ, why := range map[string]string{"UNPW": "no password authentication", "unpw": "no password authentication",
		"APIKey": "no API keys", "ldap": "is not supported"} {
		_, err := planCreate(nested(typ), grants{})
		require.Equal(t, codes.InvalidArgument, errs.Code(err), "%q: %v", typ, err)
		require.Equal(t, "spec.user.type", errs.FieldOf(status.Convert(err)), "%q", typ)
		require.Contains(t, err.Error(), why, "%q", typ)
		_, err = planCreate(flat(typ), grants{})
		require.Equal(t, codes.InvalidArgument, errs.Code(err), "%q (flat): %v", typ, err)
		require.Equal(t, "user[0].type", errs.FieldOf(status.Convert(err)), "%q (flat)", typ)
	}
}
