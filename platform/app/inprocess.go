package app

import (
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/dcm-project/dcm/platform/client"
	"github.com/dcm-project/dcm/platform/pki"
	"github.com/dcm-project/dcm/platform/server"
)

// newInProcess prepares the in-process connections of a program that
// serves gRPC over mutual TLS (server.InProcess), or nil: then every call,
// to itself too, goes over the network as before.
func newInProcess(cfg server.Config, t *pki.TLS, log *zap.Logger) *server.InProcess {
	if cfg.InsecureGRPC || cfg.GRPCAddr == "" || t == nil {
		return nil
	}
	p, err := server.NewInProcess(t)
	if err != nil {
		log.Warn("calls between this program's own services go over TLS", zap.Error(err))
		return nil
	}
	return p
}

// dialInProcess connects in-process when addr is this program's own gRPC
// endpoint (the all-in-one program's services calling each other); ok is
// false for any other address, which Dial reaches over mutual TLS.
func (e *Env) dialInProcess(addr string) (_ *grpc.ClientConn, ok bool, _ error) {
	if e.inProcess == nil || e.Config.Peer(addr) != e.Config.Peer("") {
		return nil, false, nil
	}
	c, err := client.DialInProcess(e.inProcess.Dial)
	return c, true, err
}
