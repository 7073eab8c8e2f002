package runtime

// CacheFlightsGoexit reports whether a shared call of key is in flight in
// m's cache, and how many of key's shared calls every caller left (see
// cache.leave) are still running, not yet ended by cache.finish.
func (m *methodState) CacheFlightsGoexit(key string) (inFlight bool, abandoned int) {
	c := m.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.flights[key] != nil, len(c.abandoned[key])
}
