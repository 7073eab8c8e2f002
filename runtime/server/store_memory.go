package server

import (
	"bytes"
	"container/list"
	"context"
	"errors"
	"sync"
	"time"
)

// MemoryStore is a Store in the memory of one process: for tests and for a
// service with a single replica (several replicas would each run a repeat
// once). It holds at most maxEntries keys; when full, it drops the least
// recently written entry that has expired or is done (an expired entry is
// also dropped when its key is claimed again), so that making room costs
// the same whatever the size. Pending entries are never dropped: when every
// entry is pending, Claim fails with ErrStoreFull, and the method's
// OnStoreError decides.
type MemoryStore struct {
	max int
	now func() time.Time

	mu      sync.Mutex
	entries map[string]*list.Element // of *memEntry
	order   list.List                // front: most recently written
	looked  int                      // entries evict has looked at: its cost, for the tests
}

type memEntry struct {
	key     string
	token   string // owner, while pending
	pending bool
	fp      Fingerprint
	outcome []byte
	expires time.Time
}

// ErrStoreFull is returned by a MemoryStore's Claim when every one of its
// entries belongs to a running request.
var ErrStoreFull = errors.New("resilient/server: memory idempotency store full of running requests")

// NewMemoryStore returns an empty store holding at most maxEntries keys
// (at least 1).
func NewMemoryStore(maxEntries int) *MemoryStore {
	return &MemoryStore{max: max(maxEntries, 1), now: time.Now, entries: map[string]*list.Element{}}
}

// Len returns the number of entries held, expired ones included until they
// are dropped.
func (s *MemoryStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}

// get returns the live entry of key, dropping it if it has expired.
func (s *MemoryStore) get(key string, now time.Time) *memEntry {
	el, ok := s.entries[key]
	if !ok {
		return nil
	}
	e := el.Value.(*memEntry)
	if !now.Before(e.expires) {
		s.order.Remove(el)
		delete(s.entries, key)
		return nil
	}
	return e
}

// Claim implements Store.
func (s *MemoryStore) Claim(_ context.Context, key, token string, fp Fingerprint, lease time.Duration) (Claim, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if e := s.get(key, now); e != nil {
		if e.pending && e.token == token && e.fp == fp {
			e.expires = now.Add(lease)
			return Claim{State: Claimed}, nil
		}
		if e.pending {
			return Claim{State: Pending, Fingerprint: e.fp, Token: e.token}, nil
		}
		return Claim{State: Done, Fingerprint: e.fp, Outcome: e.outcome}, nil
	}
	if len(s.entries) >= s.max && !s.evict(now) {
		return Claim{}, ErrStoreFull
	}
	e := &memEntry{key: key, token: token, pending: true, fp: fp, expires: now.Add(lease)}
	s.entries[key] = s.order.PushFront(e)
	return Claim{State: Claimed}, nil
}

// evict drops one entry to make room: the least recently written one that
// has expired or is done. It passes over only the pending entries, as many
// as requests are running, not the whole store. It reports whether it found
// one.
func (s *MemoryStore) evict(now time.Time) bool {
	var victim *list.Element
	for el := s.order.Back(); el != nil; el = el.Prev() {
		s.looked++
		if e := el.Value.(*memEntry); !e.pending || !now.Before(e.expires) {
			victim = el
			break
		}
	}
	if victim == nil {
		return false
	}
	s.order.Remove(victim)
	delete(s.entries, victim.Value.(*memEntry).key)
	return true
}

// owned returns key's entry if it is pending under token.
func (s *MemoryStore) owned(key, token string, now time.Time) *memEntry {
	if e := s.get(key, now); e != nil && e.pending && e.token == token {
		return e
	}
	return nil
}

// Renew implements Store.
func (s *MemoryStore) Renew(_ context.Context, key, token string, lease time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	e := s.owned(key, token, now)
	if e == nil {
		return ErrNotOwner
	}
	e.expires = now.Add(lease)
	return nil
}

// Complete implements Store.
func (s *MemoryStore) Complete(_ context.Context, key, token string, o []byte, ttl time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	e := s.get(key, now)
	switch {
	case e != nil && !e.pending && bytes.Equal(e.outcome, o):
		return nil // done with this very outcome: a retried Complete
	case e == nil || !e.pending || e.token != token:
		return ErrNotOwner
	}
	e.pending, e.token, e.outcome, e.expires = false, "", append([]byte(nil), o...), now.Add(ttl)
	s.order.MoveToFront(s.entries[key])
	return nil
}

// Release implements Store.
func (s *MemoryStore) Release(_ context.Context, key, token string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owned(key, token, s.now()) != nil {
		s.order.Remove(s.entries[key])
		delete(s.entries, key)
	}
	return nil
}
