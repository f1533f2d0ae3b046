package store

import (
	"context"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	dto "github.com/prometheus/client_model/go"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
)

// commandSeconds is the store's latency as the driver sees it, for the
// embedded store and MongoDB alike (deploy/grafana/dcm.json).
var commandSeconds = promauto.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "dcm_store_command_seconds",
	Help:    "Store command latency seen by the driver, by command name (find, insert, update, ...) and result (ok, error).",
	Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
}, []string{"command", "result"})

// collectionCommands counts the commands the driver sends by collection:
// which records an operation's store commands touch (a counter, not a
// label of commandSeconds, so the histogram's series stay few).
var collectionCommands = promauto.NewCounterVec(prometheus.CounterOpts{
	Name: "dcm_store_collection_commands_total",
	Help: "Store commands the driver sent, by command name (find, insert, update, ...) and collection.",
}, []string{"command", "collection"})

// commandMonitor feeds commandSeconds and collectionCommands.
var commandMonitor = &event.CommandMonitor{
	Started: func(_ context.Context, e *event.CommandStartedEvent) {
		collectionCommands.WithLabelValues(e.CommandName, commandCollection(e.CommandName, e.Command)).Inc()
	},
	Succeeded: func(_ context.Context, e *event.CommandSucceededEvent) {
		commandSeconds.WithLabelValues(e.CommandName, "ok").Observe(e.Duration.Seconds())
	},
	Failed: func(_ context.Context, e *event.CommandFailedEvent) {
		commandSeconds.WithLabelValues(e.CommandName, "error").Observe(e.Duration.Seconds())
	},
}

// commandCollection is the collection a command names: the value of its
// first element for find, insert, update, delete, count... ("find":
// "logical_clouds"), its "collection" for getMore; "" for one that names
// none (endSessions, ping).
func commandCollection(name string, cmd bson.Raw) string {
	key := name
	if name == "getMore" {
		key = "collection"
	}
	v, err := cmd.LookupErr(key)
	if err != nil {
		return ""
	}
	s, ok := v.StringValueOK()
	if !ok {
		return ""
	}
	return s
}

// CommandsSent is how many commands the driver has sent in this process,
// by command name and collection ("find logical_clouds"): the counts of
// dcm_store_collection_commands_total, read without a scrape (a scrape runs
// every collector, and core's dcm_logical_clouds reads the store itself).
func CommandsSent() map[string]uint64 {
	ch := make(chan prometheus.Metric)
	go func() {
		collectionCommands.Collect(ch)
		close(ch)
	}()
	out := map[string]uint64{}
	for m := range ch {
		var d dto.Metric
		if m.Write(&d) != nil {
			continue
		}
		var cmd, coll string
		for _, l := range d.GetLabel() {
			switch l.GetName() {
			case "command":
				cmd = l.GetValue()
			case "collection":
				coll = l.GetValue()
			}
		}
		out[strings.TrimSpace(cmd+" "+coll)] += uint64(d.GetCounter().GetValue())
	}
	return out
}
