package user_test

import (
	"github.com/dcm-project/dcm/platform/facts/factstest"
	"github.com/dcm-project/dcm/platform/store"
)

// keep makes the service on st told of clouds' logical clouds, as core
// tells it (PutLogicalCloudFacts), and answers st.
func keep(clouds *factstest.Clouds, st *store.Store, service string) *store.Store {
	clouds.Keep(st, service)
	return st
}
