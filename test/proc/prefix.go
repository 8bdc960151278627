package proc

import (
	"bytes"
	"io"
	"sync"
)

// maxPartialLine bounds how much of a line without a newline is held back.
const maxPartialLine = 64 << 10

// outMu serialises every PrefixWriter's output, so lines of different
// processes sharing one terminal never interleave mid-line.
var outMu sync.Mutex

// PrefixWriter copies whole lines to an underlying writer, each preceded by
// a prefix. It is safe for concurrent use.
type PrefixWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix []byte
	buf    []byte // an incomplete last line
}

// NewPrefixWriter returns a PrefixWriter writing to w.
func NewPrefixWriter(w io.Writer, prefix string) *PrefixWriter {
	return &PrefixWriter{w: w, prefix: []byte(prefix)}
}

// Write implements io.Writer.
func (p *PrefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	var out bytes.Buffer
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			break
		}
		out.Write(p.prefix)
		out.Write(p.buf[:i+1])
		p.buf = p.buf[i+1:]
	}
	if len(p.buf) > maxPartialLine {
		out.Write(p.prefix)
		out.Write(p.buf)
		out.WriteByte('\n')
		p.buf = nil
	}
	if out.Len() > 0 {
		outMu.Lock()
		_, err := p.w.Write(out.Bytes())
		outMu.Unlock()
		if err != nil {
			return 0, err
		}
	}
	return len(b), nil
}

// Flush writes an incomplete last line, if any.
func (p *PrefixWriter) Flush() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.buf) == 0 {
		return nil
	}
	line := append(append(append([]byte{}, p.prefix...), p.buf...), '\n')
	p.buf = nil
	outMu.Lock()
	defer outMu.Unlock()
	_, err := p.w.Write(line)
	return err
}
