// Package core implements the core service: projects (and, in later
// versions, logical clouds, cluster references and key-value pairs), and
// the token service that mints, revokes and checks the REST gateway's
// bearer tokens. It reaches other services only through their generated
// gRPC clients.
package core
