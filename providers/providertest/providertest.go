// Package providertest serves scripted HTTP responses to model API
// clients: SSE transcripts streamed event by event, error bodies with
// status codes and headers, and streams that stall or requests that hang
// until the client gives up (for abort and timeout tests). Each request consumes the next scripted response;
// the last one repeats.
package providertest

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
)

// Response is one scripted reply.
type Response struct {
	// Status defaults to 200.
	Status int
	Header map[string]string
	// Body is written as is; for SSE (status 200) it is flushed event by
	// event.
	Body string
	// Stall keeps the connection open after Body until the client goes
	// away or the server closes.
	Stall bool
	// Hang answers nothing, not even headers, until the client goes away
	// or the server closes.
	Hang bool
}

// SSE returns a 200 text/event-stream response with the transcript in
// file (typically under testdata/).
func SSE(t testing.TB, file string) Response {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("providertest: %v", err)
	}
	return Response{Body: string(b)}
}

// JSONError returns an error response with status and JSON body.
func JSONError(status int, body string, header map[string]string) Response {
	return Response{Status: status, Body: body, Header: header}
}

// Request is a request the server received.
type Request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
}

// Server is an httptest server playing scripted responses.
type Server struct {
	*httptest.Server

	mu        sync.Mutex
	responses []Response
	requests  []Request
}

// NewServer starts a server; it is closed when the test ends.
func NewServer(t testing.TB, responses ...Response) *Server {
	s := &Server{responses: responses}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

func (s *Server) next(r *http.Request, body []byte) Response {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
	if len(s.responses) == 0 {
		return Response{Status: http.StatusNotFound, Body: `{"error":{"message":"no scripted response"}}`}
	}
	resp := s.responses[0]
	if len(s.responses) > 1 {
		s.responses = s.responses[1:]
	}
	return resp
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	resp := s.next(r, body)
	if resp.Hang {
		<-r.Context().Done()
		return
	}
	for k, v := range resp.Header {
		w.Header().Set(k, v)
	}
	status := resp.Status
	if status == 0 {
		status = http.StatusOK
	}
	if status != http.StatusOK {
		if w.Header().Get("Content-Type") == "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, resp.Body)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(status)
	fl, _ := w.(http.Flusher)
	for _, ev := range strings.SplitAfter(resp.Body, "\n\n") {
		if _, err := io.WriteString(w, ev); err != nil {
			return
		}
		if fl != nil {
			fl.Flush()
		}
	}
	if resp.Stall {
		<-r.Context().Done()
	}
}

// Contains reports whether any received request body contains s.
func (s *Server) Contains(s2 string) bool {
	for _, r := range s.Requests() {
		if bytes.Contains(r.Body, []byte(s2)) {
			return true
		}
	}
	return false
}
