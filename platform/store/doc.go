// Package store connects services to their MongoDB-protocol database: a real
// MongoDB replica set by URI in production, or, when no URI is given, an
// embedded FerretDB (SQLite backend) started in-process under the data dir,
// reached over unix sockets in that 0700 directory only (never TCP).
//
// A process's services share one Store; each works on its own view (For),
// which seals secrets with the service's keys, so one service cannot open
// another's sealed values.
//
// Every record carries a version and every update is conditional on the
// version that was read (optimistic concurrency), because neither FerretDB
// nor our design uses transactions. The embedded FerretDB applies updates
// non-atomically under concurrency (FerretDB#3040), so it sits behind a
// wire-level Serializer that lets one request reach it at a time.
//
// Documents must not contain field names with a '.' (FerretDB rejects them):
// maps keyed by Kubernetes names are stored as lists of name/value pairs.
// This package must not know about any service's records.
package store
