package gateway

import (
	"crypto/sha256"
	"strings"
	"sync"
	"time"

	"github.com/dcm-project/dcm/platform/pki"
)

// TokenCacheTTL is how long the gateway trusts an issued token it has
// verified before it asks the token service again: the longest a token
// revoked through another gateway replica (or expired meanwhile: an entry
// never outlives its token's expiry) is still accepted. A revocation
// through this gateway drops its entries at once (docs/security.md).
const TokenCacheTTL = 5 * time.Second

// tokenCacheMax bounds the cache: past it, verified tokens are not cached
// (every request asks the token service, as without a cache).
const tokenCacheMax = 10000

// tokenCache remembers identities of verified issued tokens, keyed by the
// SHA-256 of the whole token (the secret is never kept), so that a REST
// call costs no store read in the common case. Only successes are cached:
// a refused token is asked about each time and counts as a failure.
type tokenCache struct {
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex
	entries map[[32]byte]cachedToken
}

type cachedToken struct {
	id      pki.Identity
	tokenID string // the token's public id, to drop it on revocation
	until   time.Time
}

func newTokenCache(ttl time.Duration) *tokenCache {
	return &tokenCache{ttl: ttl, now: time.Now, entries: map[[32]byte]cachedToken{}}
}

// get returns the identity of a token verified less than ttl ago.
func (c *tokenCache) get(tok string) (pki.Identity, bool) {
	if c == nil {
		return pki.Identity{}, false
	}
	k := sha256.Sum256([]byte(tok))
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok {
		return pki.Identity{}, false
	}
	if !c.now().Before(e.until) {
		delete(c.entries, k)
		return pki.Identity{}, false
	}
	return e.id, true
}

// put remembers a verified token until ttl from now or its expiry,
// whichever is first.
func (c *tokenCache) put(tok string, id pki.Identity, expires time.Time) {
	if c == nil {
		return
	}
	now := c.now()
	until := now.Add(c.ttl)
	if !expires.IsZero() && expires.Before(until) {
		until = expires
	}
	if !now.Before(until) {
		return
	}
	k := sha256.Sum256([]byte(tok))
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= tokenCacheMax {
		for key, e := range c.entries {
			if !now.Before(e.until) {
				delete(c.entries, key)
			}
		}
		if len(c.entries) >= tokenCacheMax {
			return
		}
	}
	c.entries[k] = cachedToken{id: id, tokenID: tokenID(tok), until: until}
}

// forget drops every entry of the token with public id tokenID (a
// revocation).
func (c *tokenCache) forget(id string) {
	if c == nil || id == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.entries {
		if e.tokenID == id {
			delete(c.entries, k)
		}
	}
}

// tokenID is the public id of an issued token (dcm_<id>_<secret>).
func tokenID(tok string) string {
	rest, ok := strings.CutPrefix(tok, "dcm_")
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, "_")
	return id
}

// revokedTokenID is the id a successful DELETE /v2/auth/tokens/{id}
// revoked ("" for any other call).
func revokedTokenID(method, path string, code int) string {
	if method != "DELETE" || code >= 300 {
		return ""
	}
	id, ok := strings.CutPrefix(path, "/v2/auth/tokens/")
	if !ok || strings.Contains(id, "/") {
		return ""
	}
	return id
}
