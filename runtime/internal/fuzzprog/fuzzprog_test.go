package fuzzprog

import "testing"

func TestProgramReadsItsBytesThenZeros(t *testing.T) {
	p := New([]byte{7, 0, 255})
	for i, want := range []byte{7, 0, 255} {
		if p.Done() {
			t.Fatalf("Done before byte %d of 3", i)
		}
		if got := p.Next(); got != want {
			t.Fatalf("byte %d = %d, want %d", i, got, want)
		}
	}
	if !p.Done() {
		t.Fatal("not Done after the last byte")
	}
	for range 3 {
		if got := p.Next(); got != 0 || !p.Done() {
			t.Fatalf("past the end: %d, Done %v; want 0, true", got, p.Done())
		}
	}
	if e := New(nil); !e.Done() || e.Next() != 0 {
		t.Fatal("an empty program is not done at once, or reads other than 0")
	}
}
