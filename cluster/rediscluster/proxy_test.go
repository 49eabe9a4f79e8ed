package rediscluster_test

import (
	"io"
	"net"
	"sync"
	"testing"
)

// proxy forwards TCP connections to a Redis and can cut them: a network
// partition between one replica and Redis, while other replicas still
// reach it.
type proxy struct {
	addr   string
	target string
	ln     net.Listener

	mu      sync.Mutex
	blocked bool           // new connections are held open and never answered
	drop    int            // the next answers from Redis to drop
	conns   []net.Conn     // every connection, both sides
	wg      sync.WaitGroup // the accept loop and the pipes
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{addr: ln.Addr().String(), target: target, ln: ln}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.conns = append(p.conns, c)
		blocked := p.blocked
		p.mu.Unlock()
		if blocked {
			continue // a black hole: the client waits for its deadline
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, s)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(s, c, false)
		go p.pipe(c, s, true)
	}
}

// pipe copies src to dst; answers (fromRedis) are dropped while drop > 0.
func (p *proxy) pipe(dst, src net.Conn, fromRedis bool) {
	defer p.wg.Done()
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			drop := fromRedis && p.drop > 0
			if drop {
				p.drop--
			}
			p.mu.Unlock()
			if !drop {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			if err != io.EOF {
				_ = src.Close()
			}
			return
		}
	}
}

// block cuts every connection and black-holes new ones.
func (p *proxy) block() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked = true
	p.closeConnsLocked()
}

// unblock lets new connections through again.
func (p *proxy) unblock() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked = false
	p.closeConnsLocked()
}

// dropAnswers drops the next n answers (reads) from Redis.
func (p *proxy) dropAnswers(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drop = n
}

func (p *proxy) closeConnsLocked() {
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

func (p *proxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	p.closeConnsLocked()
	p.mu.Unlock()
	p.wg.Wait()
}
