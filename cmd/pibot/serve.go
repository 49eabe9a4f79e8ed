package main

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"

	"github.com/pibot/pibot/adapters/telegram"
	"github.com/pibot/pibot/adapters/web"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/config"
	"github.com/pibot/pibot/internal/buildinfo"
	"github.com/pibot/pibot/internal/secret"
	"github.com/pibot/pibot/internal/tokenbucket"
)

// shutdownTimeout bounds the HTTP server's graceful shutdown.
const shutdownTimeout = 30 * time.Second

// serveCmd is `pibot serve`: the gateway with the web chat, Telegram,
// Slack and Discord on one HTTP listener, until SIGINT or SIGTERM.
type serveCmd struct{ *cli }

// run runs `pibot serve`.
func (c serveCmd) run(ctx context.Context, args []string) error {
	fs := c.newFlags("serve")
	file := configFlag(fs)
	listen := fs.String("listen", "", "HTTP listen `ADDR` (overrides http.listen)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs("serve", pos, 0, "no arguments"); err != nil {
		return err
	}
	cfg, path, err := c.loadConfig(*file)
	if err != nil {
		c.printConfigErrors(err)
		return &exitError{code: 1}
	}
	if *listen != "" {
		cfg.HTTP.Listen = *listen
	}
	// What the configuration and the file system alone make impossible is
	// refused before anything opens, as `pibot config check` refuses it.
	if err := startChecks(ctx, c.cli, cfg); err != nil {
		c.printConfigErrors(configErrors(path, err))
		return &exitError{code: 1}
	}
	log := newLogger(c.stderr, cfg.Log)

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	c.cli.redisLog.use(log)
	rep, err := openReplica(ctx, cfg, log) // nil unless cluster mode
	if err != nil {
		return err
	}
	defer rep.close()
	mux := http.NewServeMux()
	adapters, err := c.adapters(cfg, log, mux, rep.rates(), rep.webBus())
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	registerAdapterMetrics(reg, adapters)
	metrics, err := metricsHandler(cfg, promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	if err != nil {
		return err
	}
	mux.Handle("GET /metrics", metrics)
	st, err := openStack(ctx, cfg, c.getenv, log, adapters, reg, rep)
	if err != nil {
		return err
	}
	defer st.close()
	// SIGHUP reloads access, approvals and spend caps (reload.go); a
	// signal that comes before the reloader runs waits in hup.
	hup, stopHUP := notifyHUP()
	defer stopHUP()
	rl := &reloader{st: st, log: log, running: cfg, load: func() (config.Config, error) {
		next, _, err := c.loadConfig(*file)
		if *listen != "" {
			next.HTTP.Listen = *listen
		}
		return next, err
	}}

	var ready atomic.Bool
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if !ready.Load() {
			http.Error(w, "starting or stopping", http.StatusServiceUnavailable)
			return
		}
		// A full disk: messages are refused until a write works again.
		if err := st.gw.Health(); err != nil {
			http.Error(w, "storage: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		if err := rep.ping(r.Context()); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		for _, a := range adapters {
			if h, ok := a.(chat.HealthReporter); ok {
				if err := h.Health(); err != nil {
					http.Error(w, platformError(a.Platform(), err), http.StatusServiceUnavailable)
					return
				}
			}
		}
		fmt.Fprintln(w, "ok")
		if note := rep.readyNote(); note != "" {
			fmt.Fprintln(w, note)
		}
	})

	ln, err := net.Listen("tcp", cfg.HTTP.Listen)
	if err != nil {
		return &config.Error{Key: "http.listen", Msg: err.Error()}
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}

	// Every goroutine of serve belongs to g: the first that fails (or a
	// signal) cancels gctx, and that stops the others.
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		rl.run(gctx, hup)
		return nil
	})
	g.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("http: %w", err)
		}
		return nil
	})
	gwDone := make(chan struct{})
	g.Go(func() error {
		defer close(gwDone)
		err := st.gw.Run(gctx)
		if gctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled)) {
			return nil // stopped as asked
		}
		if err == nil {
			err = errors.New("gateway stopped")
		}
		return err
	})
	select {
	case <-st.gw.Ready():
	case <-gctx.Done():
	}
	ready.Store(true)
	log.Info("pibot started", "version", buildinfo.Get().Version, "commit", buildinfo.Get().Commit, "listen", ln.Addr().String(), "data_dir", cfg.DataDir, "web", cfg.WebEnabled(), "telegram", cfg.Adapter.Telegram.Enabled(), "slack", cfg.Adapter.Slack.Enabled(), "discord", cfg.Adapter.Discord.Enabled())
	fmt.Fprintf(c.stdout, "pibot ready on http://%s\n", ln.Addr())
	// Start-up garbage (config, providers, recovery) is returned to the OS
	// now rather than held until the heap grows again.
	debug.FreeOSMemory()
	releaseStartupPages()

	<-gctx.Done()
	stop()
	done := make(chan struct{})
	defer close(done)
	go c.exitOnSecondSignal(done)
	ready.Store(false)
	log.Info("shutting down")
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	// The gateway drains first (its runs finish, the rest is marked
	// interrupted) while the HTTP server still answers; then the server.
	<-gwDone
	if err := srv.Shutdown(shutCtx); err != nil {
		_ = srv.Close()
	}
	err = g.Wait()
	log.Info("stopped")
	return err
}

// exitOnSecondSignal ends the process at once on another SIGINT/SIGTERM
// while a graceful shutdown runs, until done is closed.
func (c serveCmd) exitOnSecondSignal(done <-chan struct{}) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	select {
	case <-sig:
		fmt.Fprintln(c.stderr, "pibot: second signal, exiting now")
		os.Exit(1)
	case <-done:
	}
}

// adapters builds the configured adapters and mounts their HTTP
// handlers on mux. bus carries the web chat's events between replicas
// (nil: one process).
func (c serveCmd) adapters(cfg config.Config, log *slog.Logger, mux *http.ServeMux, rates tokenbucket.Rates, bus web.Bus) ([]chat.Adapter, error) {
	var out []chat.Adapter
	if cfg.WebEnabled() {
		tok, err := webToken(cfg)
		if err != nil {
			return nil, err
		}
		w, err := web.New(web.Config{Token: tok, Logger: log.With("adapter", "web"), Bus: bus, Notice: noModelNotice(cfg, c.getenv)})
		if err != nil {
			return nil, err
		}
		mux.Handle("/", w.Handler())
		out = append(out, w)
	} else {
		mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintln(w, "pibot is running; the web chat is disabled (adapters.web.enabled: false)")
		})
	}
	if cfg.Adapter.Telegram.Enabled() {
		tc, err := telegramConfig(cfg)
		if err != nil {
			return nil, err
		}
		// In this process, or shared by the replicas (cluster mode).
		tc.Logger, tc.Rates = log, rates
		a, err := telegram.New(tc)
		if err != nil {
			return nil, err
		}
		if p := a.WebhookPath(); p != "" {
			mux.Handle("POST "+p, a.WebhookHandler())
		}
		out = append(out, a)
	}
	if cfg.Adapter.Slack.Enabled() {
		a, err := slackAdapter(cfg, log, mux, rates)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	if cfg.Adapter.Discord.Enabled() {
		a, err := newDiscord(cfg, log)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// webToken is adapters.web.token, read (inline or from its file) and
// checked against http.listen. serve's web chat and doctor use it.
func webToken(cfg config.Config) (secret.Secret, error) {
	tok, err := readSecret("adapters.web.token", cfg.Adapter.Web.Token, cfg.Adapter.Web.TokenFile)
	if err != nil {
		return tok, err
	}
	return tok, strongToken("adapters.web.token", tok.Reveal(), cfg.HTTP.Listen, " (or set adapters.web.enabled: false)")
}

// platformError is err's text led by its platform's name, once: most
// adapters' errors name their platform already ("telegram: …").
func platformError(p chat.Platform, err error) string {
	msg := err.Error()
	if strings.HasPrefix(msg, string(p)+": ") {
		return msg
	}
	return string(p) + ": " + msg
}

// strongToken checks a token that guards a listener: on a non-loopback
// listen it is required and at least web.MinTokenLen characters long.
func strongToken(key, tok, listen, alt string) error {
	if !web.RequireToken(listen) {
		return nil
	}
	gen := fmt.Sprintf("generate one with `openssl rand -hex %d`", web.MinTokenLen/2)
	if tok == "" {
		return &config.Error{Key: key, Msg: fmt.Sprintf("required because http.listen %q is not a loopback address; %s%s", listen, gen, alt)}
	}
	if n := len([]rune(tok)); n < web.MinTokenLen {
		return &config.Error{Key: key, Msg: fmt.Sprintf("is %d characters, too short to guard http.listen %q, which is not a loopback address: use at least %d; %s",
			n, listen, web.MinTokenLen, gen)}
	}
	return nil
}

// metricsHandler guards /metrics: with http.metrics_token set it asks for
// that bearer token; without one it is open on a loopback listen and off
// on any other.
func metricsHandler(cfg config.Config, h http.Handler) (http.Handler, error) {
	tok, err := config.ReadSecret("http.metrics_token", cfg.HTTP.MetricsToken, cfg.HTTP.MetricsTokenFile)
	if err != nil {
		return nil, err
	}
	if tok == "" {
		if !web.RequireToken(cfg.HTTP.Listen) {
			return h, nil
		}
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "metrics are off: http.listen is not a loopback address and http.metrics_token is not set", http.StatusForbidden)
		}), nil
	}
	if err := strongToken("http.metrics_token", tok, cfg.HTTP.Listen, ""); err != nil {
		return nil, err
	}
	want := sha256.Sum256([]byte(tok))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, got, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		g := sha256.Sum256([]byte(strings.TrimSpace(got)))
		if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(g[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="pibot metrics"`)
			http.Error(w, "metrics: bearer token required (http.metrics_token)", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}), nil
}
