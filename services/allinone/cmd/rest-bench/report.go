package main

import (
	"bufio"
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// row is one measurement: an operation at a number of clients.
type row struct {
	what     string
	clients  int
	requests int
	rate     float64 // requests per second
	p50, p99 time.Duration
	cmds     counts        // store commands during the measurement
	cpu      time.Duration // CPU time of the whole process meanwhile
}

func newRow(what string, clients int, lat []time.Duration, elapsed time.Duration, cmds counts) row {
	slices.Sort(lat)
	pct := func(p float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(p*float64(len(lat))))]
	}
	return row{what: what, clients: clients, requests: len(lat), rate: float64(len(lat)) / elapsed.Seconds(),
		p50: pct(0.50), p99: pct(0.99), cmds: cmds}
}

// perRequest is the store commands per request, in total and by command.
func (r row) perRequest() (float64, string) {
	if r.requests == 0 {
		return 0, ""
	}
	n := float64(r.requests)
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(r.cmds)) {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, r.cmds[k]/n))
	}
	return r.cmds.total() / n, strings.Join(parts, ", ")
}

func (r row) String() string {
	per, by := r.perRequest()
	return fmt.Sprintf("%-26s %d clients: %6d requests %8.1f/s p50 %-9v p99 %-9v CPU %s/request store %.2f/request (%s)",
		r.what, r.clients, r.requests, r.rate, ms(r.p50), ms(r.p99), r.cpuPerRequest(), per, by)
}

// cpuPerRequest is the process's CPU time per request, in ms.
func (r row) cpuPerRequest() string {
	if r.requests == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f ms", float64(r.cpu.Microseconds())/1000/float64(r.requests))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

// table is the markdown of the rows, each as a share of the ceiling at
// the same number of clients.
func table(kind string, rows []row, background, loaded idleLoad, clouds int) string {
	ceil := map[int]float64{}
	for _, r := range rows {
		if strings.HasPrefix(r.what, "ceiling") {
			ceil[r.clients] = r.rate
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Store: %s. Command: `make bench-rest` (`go run ./services/allinone/cmd/rest-bench -store %s`), %s, %s.\n\n",
		storeNames[kind], kind, time.Now().UTC().Format("2006-01-02 15:04 MST"), machine())
	b.WriteString("| operation | clients | requests | req/s | p50 | p99 | of the ceiling | CPU per request | store commands per request |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range rows {
		share := "n/a"
		if c := ceil[r.clients]; c > 0 {
			share = fmt.Sprintf("%.0f %%", 100*r.rate/c)
		}
		per, by := r.perRequest()
		fmt.Fprintf(&b, "| %s | %d | %d | %.1f | %s | %s | %s | %s | %.2f (%s) |\n",
			r.what, r.clients, r.requests, r.rate, ms(r.p50), ms(r.p99), share, r.cpuPerRequest(), per, by)
	}
	fmt.Fprintf(&b, "\nThe program alone (its background loops, no request) sent %.1f store commands per second and used %.0f %% of a core "+
		"with an empty store, %.1f commands per second and %.0f %% of a core with %d logical clouds; that is included above. "+
		"CPU per request is the whole process's (program and clients) CPU time during the measurement divided by its requests: "+
		"unlike requests per second, other load on the machine hardly changes it.\n",
		background.commands, 100*background.cpu, loaded.commands, 100*loaded.cpu, clouds)
	return b.String()
}

// machine describes where the benchmark ran.
func machine() string {
	model := runtime.GOARCH
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		s := bufio.NewScanner(f)
		for s.Scan() {
			if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
		_ = f.Close()
	}
	return fmt.Sprintf("%d CPUs (%s), %s/%s, %s", runtime.NumCPU(), model, runtime.GOOS, runtime.GOARCH, runtime.Version())
}

// The stores the benchmark runs on (-store).
const (
	storeEmbedded = "embedded"
	storeServer   = "server"
)

var storeNames = map[string]string{
	storeEmbedded: "the embedded store (FerretDB on SQLite, in the program, behind its serializer)",
	storeServer: "a store server (PostgreSQL, and FerretDB over TLS on loopback, as the all-in-one's user; " +
		"FerretDB runs in the benchmark's process, so its CPU is in CPU per request, PostgreSQL's is not)",
}

const (
	sectionTitle = "## REST data API: `make bench-rest`"
	endMark      = "<!-- rest-bench:end -->"
)

// beginMark opens the table of one store's run.
func beginMark(kind string) string {
	if kind == storeEmbedded {
		return "<!-- rest-bench:begin (written by make bench-rest) -->"
	}
	return "<!-- rest-bench:begin " + kind + " (written by make bench-rest) -->"
}

// writeSection puts text between the markers of store kind's table in the
// REST data API section of the file at path. A table not there yet goes
// after the embedded store's, or at the end with the section's title.
// What surrounds the markers is left as it is.
func writeSection(path, kind, text string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	doc := string(b)
	begin := beginMark(kind)
	block := begin + "\n" + text + endMark
	i := strings.Index(doc, begin)
	j := -1
	if i >= 0 {
		j = strings.Index(doc[i:], endMark)
	}
	switch {
	case j > 0:
		doc = doc[:i] + block + doc[i+j+len(endMark):]
	case kind != storeEmbedded && strings.Contains(doc, beginMark(storeEmbedded)):
		// Beside the embedded store's table, after it.
		e := strings.Index(doc, beginMark(storeEmbedded))
		k := strings.Index(doc[e:], endMark)
		if k < 0 {
			return fmt.Errorf("%s: the embedded store's table has no end mark", path)
		}
		at := e + k + len(endMark)
		doc = doc[:at] + "\n\n" + block + doc[at:]
	default:
		doc = strings.TrimRight(doc, "\n") + "\n\n" + sectionTitle + "\n\n" + block + "\n"
	}
	return os.WriteFile(path, []byte(doc), 0o644)
}
