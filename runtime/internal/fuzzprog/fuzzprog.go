// Package fuzzprog is test support for the fuzz targets of the runtime and
// its primitives: it reads a fuzz input as a program, a sequence of small
// numbers, one byte at a time.
package fuzzprog

// Program reads its input a byte at a time; past the end it reads zeros,
// so every input, however short, is a whole program.
type Program struct {
	b []byte
	i int
}

// New is a Program reading data from its start.
func New(data []byte) *Program { return &Program{b: data} }

// Next is the next byte of the input, or 0 past its end.
func (p *Program) Next() byte {
	p.i++
	if p.i > len(p.b) {
		return 0
	}
	return p.b[p.i-1]
}

// Done reports whether every byte of the input has been read.
func (p *Program) Done() bool { return p.i >= len(p.b) }
