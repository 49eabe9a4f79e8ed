package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// The replica settings beyond the defaults of startMode, and a
// round-robin load balancer for webhook deliveries.

// replicaOpts are the settings of one replica that may differ from the
// others'.
type replicaOpts struct {
	mode       string // webhook (default) or polling
	webhookURL string // the public base URL in webhook mode; default a dead one
	// script is the faux model's script, a YAML list indented for the
	// providers.f.script key; empty: the faux model echoes.
	script string
	// workspace is the tools' directory; empty: the default.
	workspace string
	// web turns the web chat on (it is off by default).
	web bool
}

// startWith runs a replica with o, listening on a free port.
func (w *clusterWorld) startWith(o replicaOpts) *crashPibot {
	w.t.Helper()
	addr := crashFreeAddr(w.t)
	return crashStart(w.t, w.bin, w.config(o, addr), w.dir, addr)
}

// startAll starts a replica for each of opts at the same moment, as an
// orchestrator starts a deployment's replicas, and waits until every one
// is ready. A replica that exits instead fails the test with its log.
func (w *clusterWorld) startAll(opts ...replicaOpts) []*crashPibot {
	w.t.Helper()
	addrs, cfgs := make([]string, len(opts)), make([]string, len(opts))
	for i, o := range opts {
		addrs[i] = crashFreeAddr(w.t)
		cfgs[i] = w.config(o, addrs[i])
	}
	all := make([]*crashPibot, len(opts))
	outs := make([]*crashLog, len(opts))
	for i, cfg := range cfgs {
		all[i], outs[i] = crashLaunch(w.t, w.bin, cfg, w.dir, addrs[i])
	}
	taken := make([]bool, len(all))
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	for i, p := range all {
		wg.Go(func() { taken[i], errs[i] = p.waitReady(outs[i]) })
	}
	wg.Wait()
	for i := range all {
		if errs[i] != nil {
			w.t.Fatalf("replica %d of %d started at once: %v", i+1, len(all), errs[i])
		}
		if taken[i] {
			// Another process took the free address meanwhile: this one
			// starts again, after the others.
			addr := crashFreeAddr(w.t)
			all[i] = crashStart(w.t, w.bin, w.config(opts[i], addr), w.dir, addr)
		}
	}
	return all
}

// replicas is startAll of n replicas with o.
func (w *clusterWorld) replicas(n int, o replicaOpts) []*crashPibot {
	w.t.Helper()
	opts := make([]replicaOpts, n)
	for i := range opts {
		opts[i] = o
	}
	return w.startAll(opts...)
}

// config writes the configuration file of a replica with o listening on
// addr and returns its path.
func (w *clusterWorld) config(o replicaOpts, addr string) string {
	w.t.Helper()
	if o.mode == "" {
		o.mode = "webhook"
	}
	if o.webhookURL == "" {
		o.webhookURL = "https://bot.example.invalid/hook"
	}
	hook := "\n    webhook_url: " + o.webhookURL + "\n    webhook_secret: " + clusterSecret
	if o.mode != "webhook" {
		hook = ""
	}
	script, agent := "", ""
	if o.script != "" {
		script = "\n    script:\n" + o.script
	}
	if o.workspace != "" {
		agent = "\n  workspace: " + o.workspace
	}
	cfg := filepath.Join(w.dir, "pibot-"+strings.ReplaceAll(addr, ":", "_")+".yaml")
	yaml := fmt.Sprintf(`data_dir: %s
http:
  listen: %s
cluster:
  redis_url: redis://%s/0
  key_prefix: %q
  lease_ttl: %dms
  secret: "test cluster secret, 32 bytes at least"
access:
  owners: ["telegram:%d"]
adapters:
  web:
    enabled: %t
  telegram:
    token: %q
    api_url: %s
    mode: %s%s
providers:
  f:
    api: faux
    models:
      - id: m%s
agent:
  model: f/m%s
  queue:
    mode: followup
`, w.data, addr, w.redis, w.prefix, w.leaseMs, clusterUser.ID, o.web, clusterToken, w.srv.URL, o.mode, hook, script, agent)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		w.t.Fatal(err)
	}
	return cfg
}

// rrProxy is a round-robin HTTP load balancer in front of the replicas, as
// an operator puts one in front of webhook deliveries: each request goes
// to the next replica; a replica that does not answer gets the client a
// 502 (the proxy does not retry: the platform does).
type rrProxy struct {
	*httptest.Server

	mu       sync.Mutex
	backends []string
	proxies  map[string]*httputil.ReverseProxy
	next     int
	failed   map[string]int // requests a replica did not answer, by base URL
	answered map[string]int // requests a replica answered 2xx, by base URL
}

// newRRProxy starts a proxy with no replicas yet (see route).
func newRRProxy(t *testing.T) *rrProxy {
	t.Helper()
	p := &rrProxy{proxies: map[string]*httputil.ReverseProxy{}, failed: map[string]int{}, answered: map[string]int{}}
	p.Server = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.Close)
	return p
}

// route sets the replicas the proxy spreads requests over, in turn.
func (p *rrProxy) route(t *testing.T, replicas ...*crashPibot) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range replicas {
		u, err := url.Parse(r.base)
		if err != nil {
			t.Fatal(err)
		}
		base := r.base
		rp := httputil.NewSingleHostReverseProxy(u)
		rp.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, err error) {
			p.mu.Lock()
			p.failed[base]++
			p.mu.Unlock()
			http.Error(w, "bad gateway: "+err.Error(), http.StatusBadGateway)
		}
		rp.ModifyResponse = func(resp *http.Response) error {
			if resp.StatusCode/100 == 2 {
				p.mu.Lock()
				p.answered[base]++
				p.mu.Unlock()
			}
			return nil
		}
		p.backends = append(p.backends, base)
		p.proxies[base] = rp
	}
}

func (p *rrProxy) serve(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	if len(p.backends) == 0 {
		p.mu.Unlock()
		http.Error(w, "no replica yet", http.StatusServiceUnavailable)
		return
	}
	rp := p.proxies[p.backends[p.next%len(p.backends)]]
	p.next++
	p.mu.Unlock()
	rp.ServeHTTP(w, r)
}

// counts returns how many requests replica r failed and answered 2xx.
func (p *rrProxy) counts(r *crashPibot) (failed, answered int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failed[r.base], p.answered[r.base]
}

// others returns the replicas of all but p.
func others(all []*crashPibot, p *crashPibot) []*crashPibot {
	var out []*crashPibot
	for _, q := range all {
		if q != p {
			out = append(out, q)
		}
	}
	return out
}

// byReplicaID returns the replica of all whose identity is id, nil if none.
func byReplicaID(all []*crashPibot, id string) *crashPibot {
	for _, p := range all {
		if replicaID(p) == id {
			return p
		}
	}
	return nil
}

// logOnFailure logs the replicas' logs and the webhook deliveries when the
// test fails.
func (w *clusterWorld) logOnFailure(all ...*crashPibot) {
	w.t.Cleanup(func() {
		if !w.t.Failed() {
			return
		}
		for _, p := range all {
			w.t.Logf("log of replica %s:\n%s", replicaID(p), p.stderr)
		}
		for _, d := range w.srv.Deliveries() {
			w.t.Logf("delivery of update %d: %d %s", d.UpdateID, d.Code, d.Err)
		}
		for _, c := range w.srv.Calls() {
			w.t.Logf("%s at %s: %d offset=%s", c.Method, c.Time.Format("15:04:05.000"), c.Code, c.Params["offset"])
		}
		for _, v := range w.srv.Violations() {
			w.t.Logf("rate violation: %s", v)
		}
	})
}
