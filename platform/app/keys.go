package app

import (
	"context"

	"google.golang.org/grpc"

	keysv1 "github.com/dcm-project/dcm/gen/dcm/keys/v1"
	"github.com/dcm-project/dcm/platform/store"
)

// keyService serves KeyService for the program's store.
type keyService struct {
	keysv1.UnimplementedKeyServiceServer
	store *store.Store
}

func (k *keyService) Register(r grpc.ServiceRegistrar) { keysv1.RegisterKeyServiceServer(r, k) }

func (k *keyService) RewrapSecrets(ctx context.Context, _ *keysv1.RewrapSecretsRequest) (*keysv1.RewrapSecretsResponse, error) {
	res, err := k.store.Rewrap(ctx)
	if err != nil {
		return nil, err
	}
	return &keysv1.RewrapSecretsResponse{
		KeyId: res.KeyID, Records: int32(res.Records), Values: int32(res.Values), Unchanged: int32(res.Unchanged),
	}, nil
}
