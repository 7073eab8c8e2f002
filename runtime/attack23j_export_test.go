package runtime

// CacheWaiters23j is how many callers wait now for the shared call of key
// in m's cache: 0 when none is in flight.
func (m *methodState) CacheWaiters23j(key string) int {
	c := m.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	if f := c.flights[key]; f != nil {
		return f.waiters
	}
	return 0
}

// CacheHolds23j reports whether m's cache keeps an answer for key.
func (m *methodState) CacheHolds23j(key string) bool {
	_, _, ok := m.cache.get(key)
	return ok
}
