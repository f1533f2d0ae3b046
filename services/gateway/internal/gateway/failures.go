package gateway

import (
	"container/list"
	"fmt"
	"math"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// MaxFailureAddrs is how many client addresses the failure limiter keeps
// at once; past it, the address seen longest ago is forgotten. About 150
// bytes each: at most some 10 MB, whatever the number of addresses.
const MaxFailureAddrs = 1 << 16

// failureSummary is how often one address's refusals leave an audit line.
const failureSummary = time.Minute

var limitedTotal = promauto.NewCounter(prometheus.CounterOpts{
	Name: "dcm_gateway_auth_rate_limited_total",
	Help: "REST requests refused with 429 because their client address failed authentication too often (DCM_AUTH_FAILURE_BURST).",
})

// FailureLimiter bounds failed authentications per client address with a
// token bucket: an address may fail Burst times at once and regains one
// failure per Refill. An address with no failure left is refused before
// its credentials are looked at, so a flood of bogus tokens costs no
// store read. Successful authentications take nothing from the bucket.
type FailureLimiter struct {
	burst  float64
	refill time.Duration
	max    int
	now    func() time.Time

	mu    sync.Mutex
	addrs map[string]*list.Element // of *addrState
	lru   *list.List               // most recently seen first
}

type addrState struct {
	key     string
	tokens  float64   // failures left
	at      time.Time // when tokens was computed
	refused int       // refusals not yet in an audit line
	logged  time.Time // when the last audit line about it was written
}

// NewFailureLimiter limits each address to burst failures at once,
// regaining one per refill; nil (no limit) if burst or refill is not
// positive.
func NewFailureLimiter(burst int, refill time.Duration) *FailureLimiter {
	if burst <= 0 || refill <= 0 {
		return nil
	}
	return &FailureLimiter{burst: float64(burst), refill: refill, max: MaxFailureAddrs, now: time.Now,
		addrs: map[string]*list.Element{}, lru: list.New()}
}

// clientKey is the address a request is counted under: its remote IP,
// not the port (a client opens as many connections as it likes), and for
// IPv6 the /64 (one host usually has the whole /64). X-Forwarded-For is
// not trusted: any client can write it.
func clientKey(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is6() {
		return netip.PrefixFrom(ip, 64).Masked().String()
	}
	return ip.String()
}

// refilled brings st's tokens to now.
func (l *FailureLimiter) refilled(st *addrState, now time.Time) {
	if el := now.Sub(st.at); el > 0 {
		st.tokens = math.Min(l.burst, st.tokens+float64(el)/float64(l.refill))
	}
	st.at = now
}

// refusal is an address's refusal: how long until it may try again, and,
// once per failureSummary, how many refusals the audit line sums up.
type refusal struct {
	retryAfter time.Duration
	summarize  bool
	count      int
}

// Error is what the client is told.
func (r *refusal) Error() string {
	return fmt.Sprintf("too many failed authentications from your address: retry in %d s", retrySeconds(r.retryAfter))
}

// RetryAfter is how long the address must wait (server.RetryLater).
func (r *refusal) RetryAfter() time.Duration { return r.retryAfter }

func retrySeconds(d time.Duration) int { return max(1, int(math.Ceil(d.Seconds()))) }

// allow reports nil if key has a failure left, or the refusal.
func (l *FailureLimiter) allow(key string) *refusal {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.addrs[key]
	if !ok {
		return nil
	}
	st := e.Value.(*addrState)
	now := l.now()
	l.refilled(st, now)
	l.lru.MoveToFront(e)
	if st.tokens >= 1 {
		return nil
	}
	limitedTotal.Inc()
	st.refused++
	r := &refusal{retryAfter: time.Duration((1 - st.tokens) * float64(l.refill))}
	if now.Sub(st.logged) >= failureSummary {
		r.summarize, r.count = true, st.refused
		st.refused, st.logged = 0, now
	}
	return r
}

// fail takes one failure from key's bucket.
func (l *FailureLimiter) fail(key string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	e, ok := l.addrs[key]
	if !ok {
		for l.lru.Len() >= l.max {
			old := l.lru.Back()
			delete(l.addrs, old.Value.(*addrState).key)
			l.lru.Remove(old)
		}
		e = l.lru.PushFront(&addrState{key: key, tokens: l.burst, at: now})
		l.addrs[key] = e
	}
	st := e.Value.(*addrState)
	l.refilled(st, now)
	l.lru.MoveToFront(e)
	st.tokens = math.Max(0, st.tokens-1)
}

// tracked is how many addresses the limiter holds (tests).
func (l *FailureLimiter) tracked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lru.Len()
}
