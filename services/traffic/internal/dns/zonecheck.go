package dns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/miekg/dns"
)

// tsigFudge is the clock skew a signed message allows (external-dns's).
const tsigFudge = 300

// checkTransfer transfers each of the run's zones (AXFR, signed as the
// provider signs it) and fails unless one of its servers answers the
// whole zone. external-dns's rfc2136 provider logs a refused or broken
// transfer and goes on as if the zone were empty: a releasing pass would
// then delete nothing and forget the run, leaving its records behind for
// good, and an active one would plan against a zone it did not read.
// Zones DCM publishes into are small, so reading each twice is cheap.
func checkTransfer(ctx context.Context, pp *providerParams) error {
	for _, zone := range pp.zones {
		var errList []error
		for _, host := range pp.hosts {
			err := transfer(ctx, net.JoinHostPort(host, strconv.Itoa(pp.port)), zone, pp)
			if err == nil {
				errList = nil
				break
			}
			errList = append(errList, err)
		}
		if len(errList) > 0 {
			return because(errors.Join(errList...), "zone %s cannot be read: its DNS server did not answer a complete transfer (refused, unreachable or timed out)", zone)
		}
	}
	return nil
}

func transfer(ctx context.Context, server, zone string, pp *providerParams) error {
	m := new(dns.Msg)
	m.SetAxfr(dns.Fqdn(zone))
	t := &dns.Transfer{DialTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second}
	if d, ok := ctx.Deadline(); ok && time.Until(d) < t.ReadTimeout {
		t.ReadTimeout = max(time.Until(d), time.Second)
	}
	if !pp.insecure {
		name := dns.Fqdn(pp.keyName)
		m.SetTsig(name, tsigAlgorithm(pp.alg), tsigFudge, time.Now().Unix())
		t.TsigSecret = map[string]string{name: pp.secret}
	}
	env, err := t.In(m, server)
	if err != nil {
		return fmt.Errorf("%s: %w", server, err)
	}
	soa := 0
	var firstErr error
	for e := range env { // drained whole: the reader goroutine ends with it
		if e.Error != nil && firstErr == nil {
			firstErr = e.Error
		}
		for _, rr := range e.RR {
			if rr.Header().Rrtype == dns.TypeSOA {
				soa++
			}
		}
	}
	if firstErr != nil {
		return fmt.Errorf("%s: %w", server, firstErr)
	}
	// A complete transfer starts and ends with the zone's SOA.
	if soa < 2 {
		return fmt.Errorf("%s: the transfer of %s was incomplete", server, zone)
	}
	return nil
}

func tsigAlgorithm(alg string) string {
	switch alg {
	case "hmac-sha1":
		return dns.HmacSHA1
	case "hmac-sha224":
		return dns.HmacSHA224
	case "hmac-sha384":
		return dns.HmacSHA384
	case "hmac-sha512":
		return dns.HmacSHA512
	}
	return dns.HmacSHA256
}
