package store

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.mongodb.org/mongo-driver/v2/event"
)

// commandSeconds is the store's latency as the driver sees it, for the
// embedded store and MongoDB alike (deploy/grafana/dcm.json).
var commandSeconds = promauto.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "dcm_store_command_seconds",
	Help:    "Store command latency seen by the driver, by command name (find, insert, update, ...) and result (ok, error).",
	Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
}, []string{"command", "result"})

// commandMonitor feeds commandSeconds.
var commandMonitor = &event.CommandMonitor{
	Succeeded: func(_ context.Context, e *event.CommandSucceededEvent) {
		commandSeconds.WithLabelValues(e.CommandName, "ok").Observe(e.Duration.Seconds())
	},
	Failed: func(_ context.Context, e *event.CommandFailedEvent) {
		commandSeconds.WithLabelValues(e.CommandName, "error").Observe(e.Duration.Seconds())
	},
}
