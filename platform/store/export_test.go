package store

import "time"

// SetCacheMaxAge sets cacheMaxAge until the returned function is called.
func SetCacheMaxAge(d time.Duration) (restore func()) {
	old := cacheMaxAge
	cacheMaxAge = d
	return func() { cacheMaxAge = old }
}
