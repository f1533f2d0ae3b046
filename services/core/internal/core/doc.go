// Package core implements the core service: projects (and, in later
// versions, logical clouds, cluster references and key-value pairs). It
// reaches other services only through their generated gRPC clients.
package core
