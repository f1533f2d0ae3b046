// Package platform is the shared plumbing of every DCM service: configuration,
// logging, errors, the MongoDB-protocol store and the gRPC/HTTP server
// bootstrap. It depends on no service; services depend on it.
package platform
