// Command dcmctl is the operator CLI of DCM: it talks to the gateway's REST
// API over HTTPS (never to the services' gRPC), with a client certificate
// or a bearer token from its config file or the local `make run` install.
// It applies YAML files of DCM resources (and emcoctl's resource files),
// reads and deletes resources, drives a logical cloud's lifecycle and
// watches its rollout. It holds no state but its config file, and it must
// not import any service's code: the REST API is its contract.
package main
