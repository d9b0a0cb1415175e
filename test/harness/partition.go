package harness

import (
	"io"
	"net"
	"sync"
)

// Partition is a TCP proxy a test controls, between a process and one of its peers (the API
// server, the manager's run protocol): Cut closes every connection it carries and refuses new
// ones, as a network partition does, while both processes go on running.
type Partition struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	conns []net.Conn
	cut   bool
}

// StartPartition listens on a loopback port and forwards each connection to target (host:port)
// until Cut. It returns the listener's error when no port is free.
func StartPartition(target string) (*Partition, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Partition{ln: ln, target: target}
	go p.serve()
	return p, nil
}

// Addr is the proxy's address (127.0.0.1:port): what the cut-off process dials instead of target.
func (p *Partition) Addr() string { return p.ln.Addr().String() }

func (p *Partition) serve() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return // Cut closed the listener
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = in.Close()
			continue
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			_ = in.Close()
			_ = out.Close()
			return
		}
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(out, in); _ = out.Close() }()
		go func() { _, _ = io.Copy(in, out); _ = in.Close() }()
	}
}

// Cut closes the listener and every connection through the proxy: nothing passes from now on.
// Calling it again does nothing more.
func (p *Partition) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	_ = p.ln.Close()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}
