package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/version"
)

// Prober is a cluster client that can tell whether its API server is
// alive (health.go): Kube and Simulated are.
type Prober interface {
	// Readyz asks the API server's /readyz with the client's credentials.
	Readyz(ctx context.Context) error
	// Version is the API server's /version (its gitVersion).
	Version(ctx context.Context) (string, error)
}

// Readyz implements Prober: GET /readyz through the cluster's REST
// config (its TLS settings and credentials).
func (k *Kube) Readyz(ctx context.Context) error {
	_, err := k.disc.RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	return err
}

// Version implements Prober.
func (k *Kube) Version(ctx context.Context) (string, error) {
	raw, err := k.disc.RESTClient().Get().AbsPath("/version").DoRaw(ctx)
	if err != nil {
		return "", err
	}
	var v version.Info
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", fmt.Errorf("/version: %w", err)
	}
	return v.GitVersion, nil
}

// Readyz implements Prober: one simulated call (its latency, its failures).
func (s *Simulated) Readyz(ctx context.Context) error { return s.call(ctx) }

// Version implements Prober.
func (s *Simulated) Version(ctx context.Context) (string, error) {
	if err := s.call(ctx); err != nil {
		return "", err
	}
	return "v0.0.0-simulated", nil
}

// The health states of a cluster (StoredClusterHealth.state).
const (
	HealthReady        = "Ready"
	HealthUnreachable  = "Unreachable"
	HealthUnauthorized = "Unauthorized"
	HealthUnknown      = "Unknown"
)

// HealthStates are the states, in the order the gauge and the docs list them.
var HealthStates = []string{HealthReady, HealthUnreachable, HealthUnauthorized, HealthUnknown}

// healthOf is the state a /readyz answer (err) means: the credentials
// refused (401, or 403 for an identity without the right to read it) is
// Unauthorized; any other error (refused, timed out, TLS, /readyz failing)
// is Unreachable.
func healthOf(err error) string {
	switch {
	case err == nil:
		return HealthReady
	case apierrors.IsUnauthorized(err), apierrors.IsForbidden(err):
		return HealthUnauthorized
	case errors.Is(err, context.Canceled):
		return HealthUnknown
	default:
		return HealthUnreachable
	}
}
